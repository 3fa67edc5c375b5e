// Command vacancyd lends a workstation's idle GPU to the LAN. See the README
// for its subcommands, or run "vacancyd help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vacancyd/vacancyd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default action so that a second one
	// ends a shutdown that hangs.
	context.AfterFunc(ctx, stop)
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
