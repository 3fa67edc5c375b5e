// Package proc runs the real vacancyd binary for end-to-end tests: it builds
// the binary once per test process, starts it on a config file the test
// writes, waits until /healthz answers, captures its log, and stops it with
// SIGTERM at cleanup.
package proc

import (
	"context"
	"fmt"
	"github.com/vacancyd/vacancyd/internal/testutil/syncbuf"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Log is a goroutine-safe buffer holding the daemon's stderr.
type Log = syncbuf.Buffer

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds ./cmd/vacancyd once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "vacancyd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "vacancyd")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/vacancyd")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, b)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Daemon is a running vacancyd.
type Daemon struct {
	// API is the API listener's base URL.
	API string
	// Dir holds the config file; relative secret paths resolve from it.
	Dir      string
	Log      *Log
	cmd      *exec.Cmd
	out      chan error
	stopOnce sync.Once
}

// Start writes config into a temporary directory (with any extra files,
// relative names to contents) and runs `vacancyd run` on it, waiting until
// apiAddr answers /healthz. The daemon is stopped at test cleanup.
func Start(t testing.TB, apiAddr, config string, files map[string]string, env ...string) *Daemon {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config = withPrivateAdminSocket(config, dir)
	confPath := filepath.Join(dir, "vacancyd.toml")
	if err := os.WriteFile(confPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{API: "http://" + apiAddr, Dir: dir, Log: &Log{}, out: make(chan error, 1)}
	d.cmd = exec.Command(Binary(t), "run", "--config", confPath, "--log-format", "json", "--log-level", "debug")
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout = d.Log
	d.cmd.Stderr = d.Log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.out <- d.cmd.Wait() }()
	t.Cleanup(func() { d.Stop(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.API+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case err := <-d.out:
			d.out <- err
			t.Fatalf("vacancyd exited before serving: %v\n%s", err, d.Log)
		case <-ctx.Done():
			t.Fatalf("vacancyd did not answer /healthz on %s\n%s", apiAddr, d.Log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConfigPath is the config file the daemon runs on.
func (d *Daemon) ConfigPath() string { return filepath.Join(d.Dir, "vacancyd.toml") }

// Signal sends sig to the daemon (SIGHUP to reload).
func (d *Daemon) Signal(sig os.Signal) error { return d.cmd.Process.Signal(sig) }

// Kill ends the daemon with SIGKILL, as a crash would, and waits for it.
func (d *Daemon) Kill() {
	d.stopOnce.Do(func() {
		_ = d.cmd.Process.Kill()
		<-d.out
	})
}

// Stop sends SIGTERM and waits for the daemon to exit; it fails the test if
// the daemon exits with an error. Calling it twice is harmless.
func (d *Daemon) Stop(t testing.TB) {
	d.stopOnce.Do(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-d.out:
			if err != nil {
				t.Errorf("vacancyd exited with %v\n%s", err, d.Log)
			}
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			t.Errorf("vacancyd did not stop on SIGTERM\n%s", d.Log)
		}
	})
}

// withPrivateAdminSocket points a config that names no admin socket at one in
// the test's directory, so that test daemons never touch /run/vacancyd or
// each other's sockets.
func withPrivateAdminSocket(config, dir string) string {
	if strings.Contains(config, "admin_socket") {
		return config
	}
	line := fmt.Sprintf("admin_socket = %q\n", filepath.Join(dir, "run", "admin.sock"))
	if i := strings.Index(config, "[server]\n"); i >= 0 {
		at := i + len("[server]\n")
		return config[:at] + line + config[at:]
	}
	return "[server]\n" + line + config
}
