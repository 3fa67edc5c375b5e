package cli

import (
	"context"
	"errors"
	"flag"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/daemon"
)

func runFlags(fs *flag.FlagSet) func(context.Context, *env, []string) int {
	path := fs.String("config", "", "configuration file (default: $"+config.EnvConfig+", then the platform's search path, then the embedded default)")
	return func(ctx context.Context, e *env, args []string) int {
		if !noArgs(e, "run", args) {
			return ExitUsage
		}
		return runDaemon(ctx, e, *path)
	}
}

// runDaemon loads and validates the configuration, and only when it is valid
// starts the daemon; a bad configuration never opens a listener.
func runDaemon(ctx context.Context, e *env, flagPath string) int {
	src := config.Locate(flagPath, e.lookupEnv)
	if src.Path != "" {
		e.log.Info("using config file", "path", src.Path)
	} else {
		e.log.Info("no config file found; running the embedded default", "looked", src.Looked)
	}
	cfg, problems, err := config.LoadSource(src, config.Options{LookupEnv: e.lookupEnv})
	for _, p := range problems.Errors() {
		e.log.Error("config error", "key", p.Key, "problem", p.Message)
	}
	for _, p := range problems.Warnings() {
		e.log.Warn("config warning", "key", p.Key, "problem", p.Message)
	}
	if err != nil {
		var inv *config.InvalidError
		if errors.As(err, &inv) {
			e.log.Error("invalid configuration; not starting", "config", sourceName(src), "errors", len(inv.Problems))
		} else {
			e.log.Error("cannot load configuration; not starting", "err", err)
		}
		return ExitConfigInvalid
	}
	if err := daemon.Run(ctx, cfg, e.log, e.level); err != nil {
		e.log.Error("vacancyd stopped with an error", "err", err)
		return ExitRuntime
	}
	return ExitOK
}

// sourceName names where a configuration came from, for messages.
func sourceName(src config.Source) string {
	if src.Path == "" {
		return "embedded default"
	}
	return src.Path
}
