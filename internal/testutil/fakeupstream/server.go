package fakeupstream

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Kind names one of the upstream servers this package fakes.
type Kind string

// The kinds of fake upstream.
const (
	KindOllama     Kind = "ollama"
	KindOpenAI     Kind = "openai"
	KindComfyUI    Kind = "comfyui"
	KindChatterbox Kind = "chatterbox"
)

// maxBody is the most of a request body a fake keeps.
const maxBody = 64 << 20

// Recorded is one request that reached a fake.
type Recorded struct {
	Method   string
	Path     string
	RawQuery string
	Query    url.Values
	Header   http.Header
	Body     []byte
	// Status is the status the fake answered; 0 while the request is in
	// flight (or for a WebSocket after the upgrade, 101).
	Status int
	// Done is true once the fake's handler returned.
	Done bool
	// Cancelled is true when the handler saw the request's context end
	// (the client went away) before it had finished answering.
	Cancelled bool
}

// JSON decodes the recorded body into v.
func (r Recorded) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Server is the part every fake shares: the listener, the request log, the
// credential check, stream pacing and cancellation accounting. The kind
// specific fakes embed it.
type Server struct {
	// URL is the base URL, http://127.0.0.1:port, without a trailing slash.
	URL string
	// Kind is the kind of upstream this server fakes.
	Kind Kind

	cfg     config
	ln      net.Listener
	srv     *http.Server
	handler http.Handler
	unauth  func(w http.ResponseWriter, r *http.Request)
	public  func(r *http.Request) bool

	done      chan struct{}
	closeOnce sync.Once
	inflight  sync.WaitGroup
	closers   []func()

	mu        sync.Mutex
	reqs      []*Recorded
	cancelled int
	active    int
	gate      chan struct{}
	changed   chan struct{}
	cancelCh  chan Recorded
}

// Start starts a fake of the given kind and returns its shared part; use
// the kind's own constructor (StartOllama, StartOpenAI, StartComfyUI,
// StartChatterbox) to reach its kind-specific methods.
func Start(t testing.TB, kind Kind, opts ...Option) *Server {
	t.Helper()
	switch kind {
	case KindOllama:
		return StartOllama(t, opts...).Server
	case KindOpenAI:
		return StartOpenAI(t, opts...).Server
	case KindComfyUI:
		return StartComfyUI(t, opts...).Server
	case KindChatterbox:
		return StartChatterbox(t, opts...).Server
	}
	t.Fatalf("fakeupstream: unknown kind %q", kind)
	return nil
}

func newServer(kind Kind, opts []Option) *Server {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return &Server{
		Kind:     kind,
		cfg:      cfg,
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
		cancelCh: make(chan Recorded, 1024),
	}
}

// listen starts serving s on a fresh loopback port; t's cleanup closes it.
func (s *Server) listen(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeupstream: listen: %v", err)
	}
	s.ln = ln
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.Close)
}

// Addr is the host:port the fake listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the fake: it releases held streams, closes the listener and
// every connection, and waits for in-flight handlers to return. It is
// called by the test's cleanup; calling it again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.mu.Lock()
		closers := s.closers
		s.mu.Unlock()
		for _, c := range closers {
			c()
		}
		if s.srv != nil {
			_ = s.srv.Close()
		}
		s.inflight.Wait()
	})
}

func (s *Server) onClose(f func()) {
	s.mu.Lock()
	s.closers = append(s.closers, f)
	s.mu.Unlock()
}
