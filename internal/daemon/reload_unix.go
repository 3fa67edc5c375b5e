//go:build unix

package daemon

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyReload delivers SIGHUP, which re-reads the configuration file.
func notifyReload() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}
