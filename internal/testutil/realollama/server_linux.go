//go:build linux

package realollama

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

// patience bounds every wait so that a broken server fails the test instead
// of hanging it; nothing asserts a duration.
const patience = 60 * time.Second

// Options tune a server.
type Options struct {
	// Env adds or overrides environment variables (KEY=value).
	Env []string
}

// Server is a running Ollama.
type Server struct {
	// Addr is host:port and URL the base URL of Ollama's API on loopback.
	Addr, URL string
	// Dir holds the models directory (models) and the home (home).
	Dir string
	Log *Log

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// HTTPClient is an HTTP client for loopback calls: no proxy from the
// environment, no keep-alive pool shared with anything else.
func HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil}}
}

// Start runs `ollama serve` on a free loopback port with a temporary models
// directory and home, and waits until it answers. It is stopped (SIGTERM,
// then its whole process group) at test cleanup, and its log is printed if
// the test failed.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	for _, d := range []string{"models", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Addr: addr, URL: "http://" + addr, Dir: dir, Log: &Log{}, done: make(chan struct{})}

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OLLAMA_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"HOME="+filepath.Join(dir, "home"),
		"OLLAMA_HOST="+addr,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		// Debug lines carry the scheduler's load, idle and unload events.
		"OLLAMA_DEBUG=1",
		// One generation at a time per model, and a context of 8192 tokens:
		// Ollama caps num_predict at ten contexts, so a long generation runs
		// for minutes on this model unless it is cancelled.
		"OLLAMA_NUM_PARALLEL=1",
		"OLLAMA_CONTEXT_LENGTH=8192",
		"OLLAMA_KEEP_ALIVE=5m",
		"OLLAMA_NOPRUNE=1",
	)
	env = append(env, o.Env...)

	s.cmd = exec.Command(bin, "serve")
	s.cmd.Dir = dir
	s.cmd.Env = env
	s.cmd.Stdout = s.Log // one writer: exec shares one pipe, so lines keep their order
	s.cmd.Stderr = s.Log
	// Its own process group, so that cleanup can also end a runner that a
	// dying server left behind.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s serve: %v", bin, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("Ollama's log (%s):\n%s", addr, tail(s.Log.String(), 20000))
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	hc := HTTPClient()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/", nil)
		if resp, err := hc.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "Ollama is running") {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("ollama serve exited before answering: %v\n%s", s.err, tail(s.Log.String(), 8000))
		case <-ctx.Done():
			t.Fatalf("ollama serve did not answer on %s\n%s", addr, tail(s.Log.String(), 8000))
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM (Ollama then unloads its runners and exits), waits,
// and kills whatever is left of the process group.
func (s *Server) stop(t testing.TB) {
	pgid := s.cmd.Process.Pid
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Errorf("ollama serve did not stop on SIGTERM; killing it")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
	// A runner is the server's child in the same group; it should be gone.
	if err := syscall.Kill(-pgid, 0); err == nil {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// Stopped reports whether the server process has exited.
func (s *Server) Stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Client is Ollama's own Go client pointed straight at the server.
func (s *Server) Client() *api.Client {
	u, _ := url.Parse(s.URL)
	return api.NewClient(u, HTTPClient())
}

// CreateModel creates model name from a GGUF file the way `ollama create`
// does: it uploads the file as a blob (POST /api/blobs/sha256:<digest>) and
// then creates the model from it (POST /api/create with files).
func (s *Server) CreateModel(t testing.TB, name string, gguf []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	sum := sha256.Sum256(gguf)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	c := s.Client()
	if err := c.CreateBlob(ctx, digest, bytes.NewReader(gguf)); err != nil {
		t.Fatalf("uploading the model blob to Ollama: %v", err)
	}
	var last string
	err := c.Create(ctx, &api.CreateRequest{
		Model: name,
		Files: map[string]string{name + ".gguf": digest},
	}, func(p api.ProgressResponse) error {
		last = p.Status
		return nil
	})
	if err != nil || last != "success" {
		t.Fatalf("creating model %s in Ollama: %v (last status %q)", name, err, last)
	}
}

// Loaded returns Ollama's /api/ps table, read directly.
func (s *Server) Loaded(t testing.TB) []api.ProcessModelResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	ps, err := s.Client().ListRunning(ctx)
	if err != nil {
		t.Fatalf("GET /api/ps from Ollama: %v", err)
	}
	return ps.Models
}

// WaitUnloaded waits until Ollama's /api/ps is empty and fails the test if
// it never is.
func (s *Server) WaitUnloaded(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ms := s.Loaded(t)
		if len(ms) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, m := range ms {
				names = append(names, m.Name)
			}
			t.Fatalf("Ollama still has models loaded: %v", names)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Warm loads model by generating one token directly.
func (s *Server) Warm(t testing.TB, model string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	stream := false
	err := s.Client().Generate(ctx, &api.GenerateRequest{
		Model: model, Prompt: "warm", Stream: &stream,
		Options: map[string]any{"num_predict": 1},
	}, func(api.GenerateResponse) error { return nil })
	if err != nil {
		t.Fatalf("warming %s: %v", model, err)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
