package cli

// vacancyd session-reporter [--socket PATH] [--interval 5s] [--source NAME]
// runs in the owner's desktop session (a systemd user unit or an XDG
// autostart entry) and reports the session's idle time and idle inhibitors
// to the service over the admin channel, as the account that runs it. It
// runs until stopped and never gives up on a missing service or idle
// source: it retries with backoff. It exits with:
//
//	0 ExitOK     stopped by a signal
//	2 ExitUsage  bad flags (an unknown --source, an interval out of range)

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/presence/desktop"
)

// Bounds of session-reporter's --interval. Keep it well under the service's
// presence.session_timeout (default 30s), or reports expire between sends.
const (
	minReportInterval = 100 * time.Millisecond
	maxReportInterval = 10 * time.Minute
)

func sessionReporterFlags(fs *flag.FlagSet) func(context.Context, *env, []string) int {
	sock := fs.String("socket", adminsock.DefaultPath, "the service's admin socket, when server.admin_socket is not the default")
	interval := fs.Duration("interval", desktop.DefaultInterval, "longest gap between two reports (keep it under the service's presence.session_timeout)")
	source := fs.String("source", desktop.SourceAuto, "idle source: auto (the first that answers) or one of this system's sources (mutter, screensaver, x11, logind on Linux)")
	return func(ctx context.Context, e *env, args []string) int {
		if !noArgs(e, "session-reporter", args) {
			return ExitUsage
		}
		if *interval < minReportInterval || *interval > maxReportInterval {
			fmt.Fprintf(e.stderr, "vacancyd session-reporter: --interval must be from %v to %v, got %v\n", minReportInterval, maxReportInterval, *interval)
			return ExitUsage
		}
		setup := desktop.Default(desktop.LookupEnv(e.lookupEnv))
		cands, err := setup.Choose(*source)
		if err != nil {
			fmt.Fprintf(e.stderr, "vacancyd session-reporter: --source: %v\n", err)
			return ExitUsage
		}
		e.log.Info("session reporter starting", "socket", *sock, "interval", *interval, "source", *source)
		r := &desktop.Reporter{
			Candidates: cands,
			Inhibitors: setup.Inhibitors,
			Sender:     desktop.SocketSender{Path: *sock},
			Interval:   *interval,
			Log:        e.log,
		}
		if err := r.Run(ctx); err != nil {
			fmt.Fprintf(e.stderr, "vacancyd session-reporter: %v\n", err)
			return ExitRuntime
		}
		return ExitOK
	}
}
