package main

// These tests run the real vacancyd: the test binary re-executes itself with
// VACANCYD_TEST_MAIN=1, and TestMain then calls main() instead of the tests,
// the way Prometheus tests its own command. Only the config search path is
// replaced (VACANCYD_TEST_SEARCH_PATH), so that no test reads /etc.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/cli"
	"github.com/vacancyd/vacancyd/internal/config"
)

const (
	envMain       = "VACANCYD_TEST_MAIN"
	envSearchPath = "VACANCYD_TEST_SEARCH_PATH"
	// commandTimeout only stops a hung child from hanging the suite.
	commandTimeout = 2 * time.Minute
)

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		config.SearchPaths = nil
		if p := os.Getenv(envSearchPath); p != "" {
			config.SearchPaths = []string{p}
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// vacancyd describes one run of the binary.
type vacancyd struct {
	args []string
	// searchPath is the only file the default search looks at; by default a
	// file in a fresh temp directory that does not exist.
	searchPath string
	// env holds extra NAME=value entries.
	env []string
}

func (v vacancyd) command(t *testing.T, ctx context.Context) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if v.searchPath == "" {
		v.searchPath = filepath.Join(t.TempDir(), "etc", "vacancyd.toml")
	}
	cmd := exec.CommandContext(ctx, exe, v.args...)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, config.EnvConfig+"=") || strings.HasPrefix(kv, "VACANCYD_TEST_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, envMain+"=1", envSearchPath+"="+v.searchPath)
	cmd.Env = append(cmd.Env, v.env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// result is what a finished run printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run runs v to completion.
func (v vacancyd) run(t *testing.T) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := v.command(t, ctx)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("vacancyd %v: %v", v.args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("vacancyd %v did not finish within %v", v.args, commandTimeout)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// hasLine reports whether out has a line starting with prefix and containing
// every one of parts.
func hasLine(out, prefix string, parts ...string) bool {
	for _, l := range lines(out) {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// A configuration with several errors: check-config reports each at its own
// key on its own line, marks warnings, and exits 1.
func TestCheckConfigReportsEveryErrorAtItsKey(t *testing.T) {
	p := writeFile(t, t.TempDir(), "bad.toml", `
[[auth.token]]
name = "ci"
scopes = ["read", "sudo"]
value = "tooshort"

[[upstream]]
id = "llama"
listen = "127.0.0.1:18080"
target = "http://user:pw@127.0.0.1:8080/?key=1"
kind = "tensorflow"
`)
	r := vacancyd{args: []string{"check-config", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitConfigInvalid)
	for _, want := range []struct{ prefix, part string }{
		{"auth.token[0].scopes[1]: ", `"sudo"`},
		{"upstream[0].kind: ", `"tensorflow"`},
		{"upstream[0].target: ", "credential"},
		{"warning: auth.token[0].value: ", ""},
	} {
		if !hasLine(r.stdout, want.prefix, want.part) {
			t.Errorf("no line %q...%q in the report:\n%s", want.prefix, want.part, r.stdout)
		}
	}
	for _, l := range lines(r.stdout) {
		if strings.Contains(l, "tooshort") || strings.Contains(l, "pw@") {
			t.Errorf("report leaks a secret: %q", l)
		}
	}
	if strings.Contains(r.stdout, "configuration OK") {
		t.Errorf("invalid configuration reported OK:\n%s", r.stdout)
	}
}

// An unknown key is an error naming the key and its line.
func TestCheckConfigUnknownKeyNamesKeyAndLine(t *testing.T) {
	p := writeFile(t, t.TempDir(), "typo.toml", "[server]\nlisten = \"127.0.0.1:9811\"\nlisen = \"127.0.0.1:1\"\n")
	r := vacancyd{args: []string{"check-config", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitConfigInvalid)
	if !hasLine(r.stdout, "server.lisen: ", "unknown key", "line 3") {
		t.Fatalf("want a line naming server.lisen and line 3:\n%s", r.stdout)
	}
}

// A valid configuration exits 0, says so and names its file; warnings are
// printed, marked, and do not fail it.
func TestCheckConfigOKWithWarnings(t *testing.T) {
	p := writeFile(t, t.TempDir(), "good.toml", `
[[auth.token]]
name = "ci"
scopes = ["read"]
value = "an-inline-token-that-is-long-enough-to-pass-1234"
`)
	r := vacancyd{args: []string{"check-config", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitOK)
	if !hasLine(r.stdout, "warning: auth.token[0].value: ") {
		t.Errorf("inline token warning missing:\n%s", r.stdout)
	}
	if !hasLine(r.stdout, "configuration OK", p) {
		t.Errorf("want 'configuration OK' naming %s:\n%s", p, r.stdout)
	}
}

// The example configuration shipped at the repository root is valid.
func TestCheckConfigExample(t *testing.T) {
	p, err := filepath.Abs(filepath.Join("..", "..", "vacancyd.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	r := vacancyd{args: []string{"check-config", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitOK)
	if !hasLine(r.stdout, "configuration OK", "vacancyd.example.toml") {
		t.Fatalf("want 'configuration OK':\n%s", r.stdout)
	}
}

// A file that cannot be read is reported and fails.
func TestCheckConfigUnreadable(t *testing.T) {
	dir := t.TempDir()
	for name, path := range map[string]string{
		"missing":   filepath.Join(dir, "missing.toml"),
		"directory": dir,
	} {
		t.Run(name, func(t *testing.T) {
			r := vacancyd{args: []string{"check-config", "--config", path}}.run(t)
			r.wantCode(t, cli.ExitConfigInvalid)
			if !strings.Contains(r.stdout+r.stderr, path) {
				t.Fatalf("message does not name %s:\nstdout:\n%s\nstderr:\n%s", path, r.stdout, r.stderr)
			}
		})
	}
}

// The file is chosen by --config, then VACANCYD_CONFIG, then the search path,
// then the embedded default.
func TestConfigSearchOrder(t *testing.T) {
	dir := t.TempDir()
	flagFile := writeFile(t, dir, "flag.toml", "")
	envFile := writeFile(t, dir, "env.toml", "")
	searchFile := writeFile(t, dir, "etc/vacancyd.toml", "")
	missing := filepath.Join(dir, "nowhere", "vacancyd.toml")
	for _, tc := range []struct {
		name   string
		v      vacancyd
		want   string
		absent string
	}{
		{"flag beats env", vacancyd{args: []string{"check-config", "--config", flagFile}, env: []string{config.EnvConfig + "=" + envFile}, searchPath: searchFile}, flagFile, ""},
		{"env beats search path", vacancyd{args: []string{"check-config"}, env: []string{config.EnvConfig + "=" + envFile}, searchPath: searchFile}, envFile, ""},
		{"search path", vacancyd{args: []string{"check-config"}, searchPath: searchFile}, searchFile, ""},
		{"embedded default", vacancyd{args: []string{"check-config"}, searchPath: missing}, "embedded default", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.v.run(t)
			r.wantCode(t, cli.ExitOK)
			if !hasLine(r.stdout, "configuration OK", tc.want) {
				t.Fatalf("want 'configuration OK' naming %s:\n%s", tc.want, r.stdout)
			}
		})
	}
}

// With no file, check-config judges the embedded default and says where it
// looked.
func TestCheckConfigEmbeddedDefaultNamesSearchPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "etc", "vacancyd.toml")
	r := vacancyd{args: []string{"check-config"}, searchPath: missing}.run(t)
	r.wantCode(t, cli.ExitOK)
	if !hasLine(r.stdout, "configuration OK", "embedded default", missing) {
		t.Fatalf("want the embedded default and %s named:\n%s", missing, r.stdout)
	}
}

var base64url43 = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// gen-token prints 32 random bytes as 43 base64url characters, once, and a
// new one each time.
func TestGenToken(t *testing.T) {
	var toks []string
	for range 2 {
		r := vacancyd{args: []string{"gen-token"}}.run(t)
		r.wantCode(t, cli.ExitOK)
		if !strings.HasSuffix(r.stdout, "\n") || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("want exactly one line, got %q", r.stdout)
		}
		tok := strings.TrimSuffix(r.stdout, "\n")
		if !base64url43.MatchString(tok) {
			t.Fatalf("token %q is not 43 base64url characters", tok)
		}
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) != 32 {
			t.Fatalf("token %q decodes to %d bytes (%v), want 32", tok, len(b), err)
		}
		toks = append(toks, tok)
	}
	if toks[0] == toks[1] {
		t.Fatalf("two runs printed the same token %q", toks[0])
	}
}

func TestVersion(t *testing.T) {
	r := vacancyd{args: []string{"version"}}.run(t)
	r.wantCode(t, cli.ExitOK)
	if !strings.HasPrefix(r.stdout, "vacancyd ") || !strings.Contains(r.stdout, runtime.Version()) || !strings.Contains(r.stdout, "revision: ") {
		t.Fatalf("version output lacks name, revision or Go version:\n%s", r.stdout)
	}
}

// Usage errors exit 2 and show the usage; asking for help exits 0.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		// listsCommands: the output is the top-level usage.
		listsCommands bool
	}{
		{"no command", nil, cli.ExitUsage, true},
		{"unknown command", []string{"serve"}, cli.ExitUsage, true},
		{"unknown flag", []string{"gen-token", "--length", "8"}, cli.ExitUsage, false},
		{"stray argument", []string{"version", "extra"}, cli.ExitUsage, false},
		{"bad log level", []string{"--log-level", "loud", "version"}, cli.ExitUsage, false},
		{"bad log format", []string{"version", "--log-format", "xml"}, cli.ExitUsage, false},
		{"help", []string{"help"}, cli.ExitOK, true},
		{"-h", []string{"-h"}, cli.ExitOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := vacancyd{args: tc.args}.run(t)
			r.wantCode(t, tc.code)
			if r.stdout+r.stderr == "" {
				t.Fatal("no message")
			}
			if tc.listsCommands {
				out := r.stdout + r.stderr
				for _, c := range []string{"run", "check-config", "gen-token", "version"} {
					if !strings.Contains(out, "  "+c+" ") {
						t.Errorf("usage does not list %q:\n%s", c, out)
					}
				}
			}
		})
	}
}
