package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/vacancyd/vacancyd/internal/config"
)

func checkConfigFlags(fs *flag.FlagSet) func(context.Context, *env, []string) int {
	path := fs.String("config", "", "configuration file (default: $"+config.EnvConfig+", then the platform's search path, then the embedded default)")
	return func(_ context.Context, e *env, args []string) int {
		if !noArgs(e, "check-config", args) {
			return ExitUsage
		}
		return checkConfig(e, *path)
	}
}

// checkConfig loads the configuration the daemon would load and writes its
// report to stdout: every error as "key: message", every warning as
// "warning: key: message", then a verdict line.
func checkConfig(e *env, flagPath string) int {
	src := config.Locate(flagPath, e.lookupEnv)
	_, problems, err := config.LoadSource(src, config.Options{LookupEnv: e.lookupEnv})
	for _, p := range problems.Errors() {
		fmt.Fprintln(e.stdout, p.String())
	}
	for _, p := range problems.Warnings() {
		fmt.Fprintln(e.stdout, p.String())
	}
	name := sourceName(src)
	if src.Path == "" && len(src.Looked) > 0 {
		name += " (no file at " + strings.Join(src.Looked, ", ") + ")"
	}
	if err != nil {
		var inv *config.InvalidError
		if errors.As(err, &inv) {
			fmt.Fprintf(e.stdout, "configuration invalid: %s: %s\n", name, count(len(inv.Problems), "error"))
		} else {
			fmt.Fprintf(e.stdout, "configuration invalid: %v\n", err)
		}
		return ExitConfigInvalid
	}
	if n := len(problems); n > 0 {
		fmt.Fprintf(e.stdout, "configuration OK: %s (%s)\n", name, count(n, "warning"))
	} else {
		fmt.Fprintf(e.stdout, "configuration OK: %s\n", name)
	}
	return ExitOK
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
