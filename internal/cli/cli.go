// Package cli is vacancyd's command line: it parses arguments, sets up
// logging and runs one subcommand, returning a process exit code.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// env is what every subcommand gets: its output streams, the logger the
// global flags configured, and the process environment.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	level          *slog.LevelVar
	lookupEnv      func(string) (string, bool)
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	// flags registers the subcommand's own flags and returns the function that
	// runs it with the remaining arguments.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) int
}

var commands = []command{
	{name: "run", summary: "run the daemon", flags: runFlags},
	{name: "check-config", summary: "check a configuration file and report every problem", flags: checkConfigFlags},
	{name: "gen-token", summary: "print a new random API token", flags: genTokenFlags},
	{name: "admin-request", summary: "send one admin request over the local admin socket", flags: adminRequestFlags},
	{name: "status", summary: "print the running daemon's state (--json for the document)", flags: statusFlags},
	{name: "session-reporter", summary: "report this desktop session's idle time to the service (run in the owner's session)", flags: sessionReporterFlags},
	{name: "version", summary: "print version, source revision and Go version", flags: versionFlags},
}

// globals are the flags every subcommand accepts, before or after its name.
type globals struct {
	logLevel  string
	logFormat string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log level: debug, info, warn or error")
	fs.StringVar(&g.logFormat, "log-format", g.logFormat, "log format on stderr: text or json")
}

// Main runs the command line args (without the program name) and returns the
// exit code. ctx ends when the process is asked to stop.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, args, stdout, stderr, os.LookupEnv)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	g := &globals{logLevel: "info", logFormat: "text"}
	top := flag.NewFlagSet("vacancyd", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return ExitOK
		}
		fmt.Fprintf(stderr, "vacancyd: %v\n\n", err)
		usage(stderr)
		return ExitUsage
	}
	rest := top.Args()
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "vacancyd: no command given")
		fmt.Fprintln(stderr)
		usage(stderr)
		return ExitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		usage(stdout)
		return ExitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "vacancyd: unknown command %q\n\n", name)
		usage(stderr)
		return ExitUsage
	}

	fs := flag.NewFlagSet("vacancyd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	runCmd := cmd.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vacancyd %s [flags]\n\n%s.\n\nflags:\n", name, cmd.summary)
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	log, level, err := newLogger(stderr, g.logLevel, g.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "vacancyd: %v\n", err)
		return ExitUsage
	}
	return runCmd(ctx, &env{stdout: stdout, stderr: stderr, log: log, level: level, lookupEnv: lookup}, fs.Args())
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("vacancyd lends this workstation's idle GPU to the LAN.\n\n")
	b.WriteString("usage: vacancyd [global flags] <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.summary)
	}
	b.WriteString("  help           print this help\n")
	b.WriteString("\nglobal flags (before or after the command):\n")
	b.WriteString("  --log-level LEVEL    debug, info, warn or error (default info)\n")
	b.WriteString("  --log-format FORMAT  text or json, written to stderr (default text)\n")
	b.WriteString("\nRun 'vacancyd <command> -h' for a command's own flags.\n")
	_, _ = io.WriteString(w, b.String())
}

// noArgs reports a usage error when a command that takes no arguments got some.
func noArgs(e *env, name string, args []string) bool {
	if len(args) == 0 {
		return true
	}
	fmt.Fprintf(e.stderr, "vacancyd %s: unexpected argument %q\n", name, args[0])
	return false
}
