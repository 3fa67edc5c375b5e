package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
)

// patience only keeps a broken test from hanging; nothing asserts a duration.
const patience = 30 * time.Second

var client = &http.Client{Timeout: patience}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitHealthy polls until addr answers /healthz.
func waitHealthy(t *testing.T, addr string, runErr <-chan error) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		select {
		case err := <-runErr:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not healthy within %v", addr, patience)
}

// Run serves the API on server.listen and returns nil once its context ends,
// with the listener closed.
func TestRunServesAndStops(t *testing.T) {
	cfg := config.Defaults()
	cfg.Server.Listen = freeAddr(t)
	cfg.Server.AdminSocket = t.TempDir() + "/run/admin.sock"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- Run(ctx, &cfg, testLog(t), nil) }()
	waitHealthy(t, cfg.Server.Listen, runErr)

	resp, err := client.Get("http://" + cfg.Server.Listen + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d while serving, want 200", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(ShutdownTimeout + patience):
		t.Fatal("Run did not return after its context ended")
	}
	if c, err := net.Dial("tcp", cfg.Server.Listen); err == nil {
		c.Close()
		t.Fatal("listener still open after Run returned")
	}
}

// A listener that cannot open is an error naming its config key, and Run
// returns it at once.
func TestRunListenErrorNamesKey(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := config.Defaults()
	cfg.Server.Listen = held.Addr().String()
	cfg.Server.AdminSocket = t.TempDir() + "/run/admin.sock"
	err = Run(context.Background(), &cfg, nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "server.listen: listen tcp "+cfg.Server.Listen) {
		t.Fatalf("Run = %v, want server.listen: listen tcp %s: ...", err, cfg.Server.Listen)
	}
}

// startServer serves h on a fresh loopback port with lim.
func startServer(t *testing.T, h http.Handler, lim config.Limits) *server {
	t.Helper()
	s, err := listen("test.listen", "127.0.0.1:0", h, lim, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.serve() }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Shutdown lets an in-flight request finish before the server stops.
func TestShutdownFinishesInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	}), config.Defaults().Server.Limits)

	got := make(chan string, 1)
	go func() {
		resp, err := client.Get("http://" + s.addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	done := make(chan error, 1)
	go func() { done <- s.shutdown(context.Background()) }()
	close(release)
	if body := <-got; body != "finished" {
		t.Fatalf("in-flight request got %q, want finished", body)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown = %v", err)
	}
}

// A request that outlives the shutdown deadline is cut off: shutdown is bounded.
func TestShutdownIsBounded(t *testing.T) {
	entered := make(chan struct{})
	stuck := make(chan struct{})
	defer close(stuck)
	s := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}), config.Defaults().Server.Limits)
	clientErr := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + s.addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown = %v, want deadline exceeded", err)
	}
	if err := <-clientErr; err == nil {
		t.Fatal("the stuck request completed; want its connection closed")
	}
}

// server.limits.max_connections caps open connections per listener: a second
// client waits until the first disconnects.
func TestMaxConnections(t *testing.T) {
	lim := config.Defaults().Server.Limits
	lim.MaxConnections = 1
	s := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), lim)

	first := rawConn(t, s.addr)
	if status := first.roundTrip(t); status != "HTTP/1.1 200 OK" {
		t.Fatalf("first connection: %q", status)
	}
	// The first connection stays open (keep-alive) and holds the only slot.
	second := rawConn(t, s.addr)
	second.send(t)
	if err := second.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if line, err := second.r.ReadString('\n'); err == nil {
		t.Fatalf("second connection was served (%q) while the first held the only slot", line)
	}
	first.conn.Close()
	if err := second.conn.SetReadDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	line, err := second.r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "HTTP/1.1 200 OK" {
		t.Fatalf("second connection after the first closed: %q, %v", line, err)
	}
}

// server.limits.header_timeout closes a connection whose headers never finish.
func TestHeaderTimeout(t *testing.T) {
	lim := config.Defaults().Server.Limits
	lim.HeaderTimeout = config.D(100 * time.Millisecond)
	s := startServer(t, http.NotFoundHandler(), lim)
	c := rawConn(t, s.addr)
	if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.conn.SetReadDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server kept a connection with unfinished headers open")
	}
}

type raw struct {
	conn net.Conn
	r    *bufio.Reader
}

func rawConn(t *testing.T, addr string) *raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{conn: c, r: bufio.NewReader(c)}
}

func (c *raw) send(t *testing.T) {
	t.Helper()
	if _, err := fmt.Fprint(c.conn, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

// roundTrip sends a request and reads the whole response, returning its status line.
func (c *raw) roundTrip(t *testing.T) string {
	t.Helper()
	c.send(t)
	if err := c.conn.SetReadDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Proto + " " + resp.Status
}

// server.limits.idle_timeout closes a keep-alive connection with no request.
func TestIdleTimeout(t *testing.T) {
	lim := config.Defaults().Server.Limits
	lim.IdleTimeout = config.D(100 * time.Millisecond)
	s := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), lim)
	c := rawConn(t, s.addr)
	if status := c.roundTrip(t); status != "HTTP/1.1 200 OK" {
		t.Fatalf("request: %q", status)
	}
	if err := c.conn.SetReadDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server kept an idle keep-alive connection open")
	}
}
