package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"

	"github.com/vacancyd/vacancyd/internal/version"
)

func versionFlags(*flag.FlagSet) func(context.Context, *env, []string) int {
	return func(_ context.Context, e *env, args []string) int {
		if !noArgs(e, "version", args) {
			return ExitUsage
		}
		fmt.Fprintf(e.stdout, "vacancyd %s\nrevision: %s\ngo:       %s %s/%s\n",
			version.Version, version.Revision, version.GoVersion, runtime.GOOS, runtime.GOARCH)
		return ExitOK
	}
}
