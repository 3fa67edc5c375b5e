package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags out of range are usage errors, named on stderr.
func TestSessionReporterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "10ms"}, "--interval must be from 100ms to 10m0s"},
		{[]string{"--interval", "1h"}, "--interval must be from"},
		{[]string{"--source", "carrier-pigeon"}, `unknown idle source "carrier-pigeon"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), append([]string{"session-reporter"}, tc.args...), &out, &errb, func(string) (string, bool) { return "", false })
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), ExitUsage, tc.want)
		}
	}
}

// iniFile reads a systemd unit or desktop entry: section -> key -> values
// (a key may repeat), skipping comments.
func iniFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, i+1, line)
			}
			out[section][strings.TrimSpace(k)] = append(out[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return out
}

// checkReporterCommand checks that a packaged command line runs the
// session-reporter subcommand with flags it accepts.
func checkReporterCommand(t *testing.T, where, line string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "/usr/local/bin/vacancyd" || f[1] != "session-reporter" {
		t.Fatalf("%s runs %q, want /usr/local/bin/vacancyd session-reporter", where, line)
	}
	found := false
	for _, c := range commands {
		if c.name == f[1] {
			found = true
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.flags(fs)
			if err := fs.Parse(f[2:]); err != nil || fs.NArg() != 0 {
				t.Fatalf("%s: the flags in %q do not parse: %v", where, line, err)
			}
		}
	}
	if !found {
		t.Fatalf("%s: vacancyd has no %s command", where, f[1])
	}
}

// The systemd user unit runs the reporter in the graphical session, stops
// with it and restarts it after a failure.
func TestPackagedSessionReporterUnit(t *testing.T) {
	path := filepath.Join("..", "..", "packaging", "systemd", "vacancyd-session-reporter.service")
	u := iniFile(t, path)
	lines := u["Service"]["ExecStart"]
	if len(lines) != 1 {
		t.Fatalf("%s: ExecStart %q, want one", path, lines)
	}
	checkReporterCommand(t, path+" ExecStart", lines[0])
	for _, want := range []struct{ section, key, value string }{
		{"Service", "Restart", "on-failure"},
		{"Unit", "PartOf", "graphical-session.target"},
		{"Install", "WantedBy", "graphical-session.target"},
	} {
		if got := u[want.section][want.key]; len(got) != 1 || got[0] != want.value {
			t.Errorf("%s: [%s] %s = %q, want %q", path, want.section, want.key, got, want.value)
		}
	}
}

// The XDG autostart entry runs the same command where systemd does not
// manage the session.
func TestPackagedSessionReporterAutostart(t *testing.T) {
	path := filepath.Join("..", "..", "packaging", "xdg", "vacancyd-session-reporter.desktop")
	d := iniFile(t, path)["Desktop Entry"]
	if d == nil {
		t.Fatalf("%s: no [Desktop Entry]", path)
	}
	lines := d["Exec"]
	if len(lines) != 1 {
		t.Fatalf("%s: Exec %q, want one", path, lines)
	}
	checkReporterCommand(t, path+" Exec", lines[0])
	for key, want := range map[string]string{"Type": "Application", "X-GNOME-HiddenUnderSystemd": "true", "NoDisplay": "true"} {
		if got := d[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s = %q, want %q", path, key, got, want)
		}
	}
}
