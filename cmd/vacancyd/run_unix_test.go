//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/vacancyd/vacancyd/internal/cli"
)

// daemon is a running "vacancyd run" whose stderr is JSON log lines.
type daemon struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	addr   string // the API address it logged as listening

	mu   sync.Mutex
	logs []map[string]any
	raw  bytes.Buffer
	done chan struct{} // closed when stderr ends
}

// startErr is returned when the daemon exited before it was listening.
type startErr struct {
	code   int
	stderr string
}

func (e *startErr) Error() string {
	return fmt.Sprintf("vacancyd exited with code %d before listening:\n%s", e.code, e.stderr)
}

// start runs v (which must log as JSON) and waits until it logs "listening".
func (v vacancyd) start(t *testing.T) (*daemon, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	cmd := v.command(t, ctx)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, cancel: cancel, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Bytes()
			var rec map[string]any
			_ = json.Unmarshal(line, &rec)
			d.mu.Lock()
			d.raw.Write(line)
			d.raw.WriteByte('\n')
			d.logs = append(d.logs, rec)
			d.mu.Unlock()
			if rec["msg"] == "listening" && rec["key"] == "server.listen" {
				select {
				case listening <- fmt.Sprint(rec["addr"]):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cancel()
	})
	select {
	case d.addr = <-listening:
		return d, nil
	case <-d.done:
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, &startErr{code: ee.ExitCode(), stderr: d.stderr()}
		}
		return nil, &startErr{code: 0, stderr: d.stderr()}
	case <-ctx.Done():
		t.Fatalf("vacancyd did not start listening within %v:\n%s", commandTimeout, d.stderr())
	}
	return nil, nil
}

func (d *daemon) stderr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.raw.String()
}

// logged returns the first JSON log record with msg.
func (d *daemon) logged(msg string) map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.logs {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// stop sends sig and returns the exit code.
func (d *daemon) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-d.done
	err := d.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return 0
}

var client = &http.Client{Timeout: 30 * time.Second}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// checkAPI checks the probes and metrics of a running daemon.
func checkAPI(t *testing.T, addr string) {
	t.Helper()
	base := "http://" + addr
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz = %d %q, want 200 ready", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d, want 200", code)
	}
	for _, m := range []string{"vacancyd_build_info{", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(body, "\n"+m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	t.Run("promtool", func(t *testing.T) { promtoolCheck(t, body) })
}

// promtoolCheck validates a metrics exposition with Prometheus's own linter.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("VACANCYD_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not found and VACANCYD_REQUIRE_TOOLS=1; install the Debian package prometheus (scripts/test does)")
		}
		t.Skip("skipping: promtool not found (install the Debian package prometheus, or run scripts/test)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// With no config file anywhere, run serves the embedded default on
// 127.0.0.1:9811, says so and where it looked, and stops cleanly on SIGTERM.
func TestRunEmbeddedDefault(t *testing.T) {
	const addr = "127.0.0.1:9811"
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Skipf("skipping: the embedded default's port is busy on this machine (%v); TestRunOnConfiguredPort covers the same on a free port", err)
	} else {
		ln.Close()
	}
	search := filepath.Join(t.TempDir(), "etc", "vacancyd", "vacancyd.toml")
	d, err := vacancyd{args: []string{"--log-format", "json", "run"}, searchPath: search}.start(t)
	if se := (*startErr)(nil); errors.As(err, &se) && strings.Contains(se.stderr, "address already in use") {
		t.Skipf("skipping: %s became busy before vacancyd could bind it", addr)
	} else if err != nil {
		t.Fatal(err)
	}
	if d.addr != addr {
		t.Errorf("listening on %s, want %s", d.addr, addr)
	}
	rec := d.logged("no config file found; running the embedded default")
	if rec == nil {
		t.Fatalf("no log line says the embedded default is used:\n%s", d.stderr())
	}
	if looked := fmt.Sprint(rec["looked"]); !strings.Contains(looked, search) {
		t.Errorf("log says it looked at %s, want %s", looked, search)
	}
	checkAPI(t, addr)
	if code := d.stop(t, syscall.SIGTERM); code != cli.ExitOK {
		t.Fatalf("exit code after SIGTERM = %d, want 0:\n%s", code, d.stderr())
	}
}

// run serves the configured API address, and both SIGTERM and SIGINT shut it
// down with exit code 0 and the listener closed.
func TestRunOnConfiguredPort(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freePort(t)
			p := writeFile(t, t.TempDir(), "vacancyd.toml", fmt.Sprintf("[server]\nlisten = %q\nadmin_socket = %q\n", addr, t.TempDir()+"/run/admin.sock"))
			d, err := vacancyd{args: []string{"run", "--config", p, "--log-format", "json"}}.start(t)
			if err != nil {
				t.Fatal(err)
			}
			if d.addr != addr {
				t.Errorf("listening on %s, want %s", d.addr, addr)
			}
			if rec := d.logged("using config file"); rec == nil || rec["path"] != p {
				t.Errorf("no log line names the config file %s:\n%s", p, d.stderr())
			}
			checkAPI(t, addr)
			if code := d.stop(t, sig); code != cli.ExitOK {
				t.Fatalf("exit code after %v = %d, want 0:\n%s", sig, code, d.stderr())
			}
			if d.logged("stopped") == nil {
				t.Errorf("no 'stopped' log line:\n%s", d.stderr())
			}
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections after vacancyd exited", addr)
			}
		})
	}
}

// Config warnings are logged as WARN lines and do not stop the daemon.
func TestRunLogsWarnings(t *testing.T) {
	addr := freePort(t)
	p := writeFile(t, t.TempDir(), "vacancyd.toml", fmt.Sprintf(`
[server]
listen = %q

[[auth.token]]
name = "ci"
scopes = ["read"]
value = "short"
`, addr))
	d, err := vacancyd{args: []string{"--log-format", "json", "run", "--config", p}}.start(t)
	if err != nil {
		t.Fatal(err)
	}
	rec := d.logged("config warning")
	if rec == nil || rec["level"] != "WARN" || rec["key"] != "auth.token[0].value" {
		t.Errorf("want a WARN config warning at auth.token[0].value, got %v:\n%s", rec, d.stderr())
	}
	if strings.Contains(d.stderr(), `"short"`) {
		t.Errorf("the log shows the token value:\n%s", d.stderr())
	}
	if code := d.stop(t, syscall.SIGTERM); code != cli.ExitOK {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// A bad configuration exits 1 before any listener opens: with its port held
// by someone else, run reports the config errors and never tries to bind.
func TestRunBadConfigOpensNoListener(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	p := writeFile(t, t.TempDir(), "vacancyd.toml", fmt.Sprintf(`
[server]
listen = %q

[[upstream]]
id = "llama"
listen = "127.0.0.1:1"
target = "http://127.0.0.1:8080"
kind = "tensorflow"
`, addr))
	r := vacancyd{args: []string{"run", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitConfigInvalid)
	if !strings.Contains(r.stderr, "key=upstream[0].kind") {
		t.Errorf("stderr does not name upstream[0].kind:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "address already in use") || strings.Contains(r.stderr, "listening") {
		t.Errorf("run tried to open a listener despite the bad config:\n%s", r.stderr)
	}
}

// A listener that cannot open fails the start with an error naming its key.
func TestRunListenFailureNamesKey(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	p := writeFile(t, t.TempDir(), "vacancyd.toml", fmt.Sprintf("[server]\nlisten = %q\nadmin_socket = %q\n", addr, t.TempDir()+"/run/admin.sock"))
	r := vacancyd{args: []string{"run", "--config", p}}.run(t)
	r.wantCode(t, cli.ExitRuntime)
	if !strings.Contains(r.stderr, "server.listen: listen tcp "+addr) || !strings.Contains(r.stderr, "address already in use") {
		t.Fatalf("want server.listen: listen tcp %s: ... address already in use:\n%s", addr, r.stderr)
	}
}

// --log-level applies wherever it is given: at error, info lines vanish.
func TestRunLogLevel(t *testing.T) {
	p := writeFile(t, t.TempDir(), "vacancyd.toml", "[server]\nlisten = \"nonsense\"\n")
	for _, args := range [][]string{
		{"--log-level", "error", "run", "--config", p},
		{"run", "--config", p, "--log-level", "error"},
	} {
		r := vacancyd{args: args}.run(t)
		r.wantCode(t, cli.ExitConfigInvalid)
		if strings.Contains(r.stderr, "level=INFO") || !strings.Contains(r.stderr, "level=ERROR") {
			t.Errorf("%v: want ERROR lines only:\n%s", args, r.stderr)
		}
	}
}
