package fakeupstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
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

// Option configures a fake.
type Option func(*config)

type config struct {
	bearer    string
	tokensSet bool
	basic     bool
	basicUser string
	basicPass string
	tokens    int
	delay     time.Duration
	release   <-chan struct{}
	models    []string
	voices    []string
	version   string
	keepAlive time.Duration
	stubborn  bool
}

func defaultConfig() config {
	return config{tokens: 5, keepAlive: 5 * time.Minute}
}

// WithBearer makes the fake require "Authorization: Bearer token".
func WithBearer(token string) Option { return func(c *config) { c.bearer = token } }

// WithBasicAuth makes the fake require HTTP basic credentials.
func WithBasicAuth(user, pass string) Option {
	return func(c *config) { c.basic, c.basicUser, c.basicPass = true, user, pass }
}

// WithTokens sets how many pieces a generation streams: tokens for Ollama
// and llama.cpp (a request's own num_predict/max_tokens/n_predict may cut
// it shorter), sampler steps for ComfyUI, audio chunks for Chatterbox.
// The default is 5.
func WithTokens(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.tokens, c.tokensSet = n, true
		}
	}
}

// WithTokenDelay makes the fake wait d before each piece after the first.
func WithTokenDelay(d time.Duration) Option { return func(c *config) { c.delay = d } }

// WithRelease makes every generation wait, after its first piece, until ch
// is closed (or the request is cancelled, or the fake closes).
func WithRelease(ch <-chan struct{}) Option { return func(c *config) { c.release = ch } }

// WithModels sets the models the fake serves. For Ollama a name without a
// tag gets ":latest", and a name containing "embed" is an embedding-only
// model; for llama.cpp the first name is the loaded model's alias; for
// ComfyUI they are the checkpoint file names.
func WithModels(names ...string) Option {
	return func(c *config) { c.models = append([]string(nil), names...) }
}

// WithVoices sets Chatterbox's predefined voice files (e.g. "Emily.wav").
func WithVoices(files ...string) Option {
	return func(c *config) { c.voices = append([]string(nil), files...) }
}

// WithRefuseToStop makes a ComfyUI fake accept /interrupt and a queue
// delete or clear (200, as the real server answers) without stopping or
// removing anything: the running prompt keeps running and queued prompts
// stay queued, as a wedged server would behave. Reclaim tests use it to
// prove that work whose end cannot be confirmed is held. The requests are
// recorded as usual; [ComfyUI.Interrupted] stays empty, since nothing was
// stopped. Other kinds ignore it.
func WithRefuseToStop() Option { return func(c *config) { c.stubborn = true } }

// WithVersion sets the version the fake reports (Ollama's /api/version,
// llama.cpp's build info, ComfyUI's comfyui_version).
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithDefaultKeepAlive sets Ollama's OLLAMA_KEEP_ALIVE (default 5m): how
// long a model stays loaded when a request gives no keep_alive.
func WithDefaultKeepAlive(d time.Duration) Option { return func(c *config) { c.keepAlive = d } }

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

// Requests returns a copy of every request recorded so far, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = copyRecorded(r)
	}
	return out
}

// RequestsTo returns the recorded requests whose path is path.
func (s *Server) RequestsTo(path string) []Recorded {
	var out []Recorded
	for _, r := range s.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Last returns the most recent request, and false when there is none.
func (s *Server) Last() (Recorded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return Recorded{}, false
	}
	return copyRecorded(s.reqs[len(s.reqs)-1]), true
}

// Count is how many requests reached the fake.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Reset forgets the recorded requests and the cancellation count. It does
// not touch a fake's own state (loaded models, queue, history).
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.cancelled = 0
	s.mu.Unlock()
	for {
		select {
		case <-s.cancelCh:
		default:
			return
		}
	}
}

// Cancelled is how many requests the fake saw cancelled mid-answer.
func (s *Server) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Cancellations delivers each request the fake saw cancelled, as it happens
// (buffered; a test that does not read it loses nothing else).
func (s *Server) Cancellations() <-chan Recorded { return s.cancelCh }

// InFlight is how many requests are being answered now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// WaitCancelled waits until at least n requests were seen cancelled, or ctx
// ends.
func (s *Server) WaitCancelled(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return s.cancelled >= n })
}

// WaitRequests waits until at least n requests were recorded, or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return len(s.reqs) >= n })
}

// WaitIdle waits until no request is in flight, or ctx ends. An open
// WebSocket (ComfyUI's /ws) counts as in flight until it closes.
func (s *Server) WaitIdle(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.active == 0 })
}

// waitFor waits until cond (called with s.mu held) is true.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes waiters; s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Hold makes every generation that reaches its second piece from now on
// wait until release is called (or its request is cancelled, or the fake
// closes). Generations already waiting on an earlier hold keep waiting for
// that one.
func (s *Server) Hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.gate = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(ch)
			s.mu.Lock()
			if s.gate == ch {
				s.gate = nil
			}
			s.mu.Unlock()
		})
	}
}

func copyRecorded(r *Recorded) Recorded {
	c := *r
	c.Header = r.Header.Clone()
	c.Query = cloneValues(r.Query)
	c.Body = append([]byte(nil), r.Body...)
	return c
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// reqState is what the wrapper and the handlers share about one request.
type reqState struct {
	rec       *Recorded
	cancelled bool
	hijacked  bool
}

type stateKey struct{}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// serve records the request, checks the credential and dispatches.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Done()

	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))

	rec := &Recorded{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Query:    r.URL.Query(),
		Header:   r.Header.Clone(),
		Body:     body,
	}
	st := &reqState{rec: rec}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.active++
	s.notifyLocked()
	s.mu.Unlock()

	sw := &statusWriter{ResponseWriter: w, st: st}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	defer func() {
		s.mu.Lock()
		if st.hijacked {
			rec.Status = http.StatusSwitchingProtocols
		} else {
			rec.Status = sw.status
			if rec.Status == 0 {
				rec.Status = http.StatusOK
			}
		}
		rec.Done = true
		rec.Cancelled = st.cancelled
		if st.cancelled {
			s.cancelled++
			select {
			case s.cancelCh <- copyRecorded(rec):
			default:
			}
		}
		s.active--
		s.notifyLocked()
		s.mu.Unlock()
	}()

	if !s.authorized(r) {
		s.unauth(sw, r)
		return
	}
	s.handler.ServeHTTP(sw, r)
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.bearer == "" && !s.cfg.basic {
		return true
	}
	if s.public != nil && s.public(r) {
		return true
	}
	if s.cfg.bearer != "" {
		got := r.Header.Get("Authorization")
		if s.Kind == KindOpenAI && got == "" {
			// llama.cpp retries with the Anthropic header.
			got = r.Header.Get("X-Api-Key")
		}
		got = strings.TrimPrefix(got, "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.bearer)) == 1 {
			return true
		}
	}
	if s.cfg.basic {
		u, p, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(s.cfg.basicUser)) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg.basicPass)) == 1 {
			return true
		}
	}
	return false
}

// challenge sets WWW-Authenticate for the configured credential.
func (s *Server) challenge(w http.ResponseWriter) {
	if s.cfg.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+string(s.Kind)+`"`)
	} else {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
}

// statusWriter remembers the status and marks the request cancelled when a
// write fails because the client went away.
type statusWriter struct {
	http.ResponseWriter
	st     *reqState
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack lets a WebSocket take the connection over.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("fakeupstream: connection cannot be hijacked")
	}
	c, brw, err := h.Hijack()
	if err == nil {
		w.st.hijacked = true
	}
	return c, brw, err
}

// Unwrap serves http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pace is called before piece i (0-based) of a generation. Piece 0 goes
// out at once; before piece 1 the generation waits for WithRelease's
// channel and Hold's gate; before every later piece it waits the token
// delay. It returns false when the generation must stop: the request was
// cancelled (which it records) or the fake is closing.
func (s *Server) pace(r *http.Request, i int) bool {
	return s.paceCtx(r.Context(), stateOf(r), i, nil)
}

// paceCtx is pace for work that is not tied to one request (ComfyUI's
// worker); stop, when not nil, ends the wait like a cancel but is not
// counted as one.
func (s *Server) paceCtx(ctx context.Context, st *reqState, i int, stop <-chan struct{}) bool {
	cancelled := func() bool {
		if st != nil {
			st.cancelled = true
		}
		return false
	}
	if err := ctx.Err(); err != nil {
		return cancelled()
	}
	if i <= 0 {
		return true
	}
	if i == 1 {
		if s.cfg.release != nil {
			select {
			case <-s.cfg.release:
			case <-ctx.Done():
				return cancelled()
			case <-s.done:
				return false
			case <-stop:
				return false
			}
		}
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return cancelled()
			case <-s.done:
				return false
			case <-stop:
				return false
			}
		}
	}
	if s.cfg.delay > 0 {
		tm := time.NewTimer(s.cfg.delay)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return cancelled()
		case <-s.done:
			return false
		case <-stop:
			return false
		}
	}
	return true
}

// markCancelled records that r's client went away mid-answer.
func markCancelled(r *http.Request) {
	if st := stateOf(r); st != nil {
		st.cancelled = true
	}
}

// writeChunk writes p and flushes. A request whose context has already
// ended (checked before writing, so that a client which leaves right after
// the last piece is not counted) or a failed write marks the request
// cancelled and returns false.
func writeChunk(w http.ResponseWriter, r *http.Request, p []byte) bool {
	if r.Context().Err() != nil {
		markCancelled(r)
		return false
	}
	if _, err := w.Write(p); err != nil {
		markCancelled(r)
		return false
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// words is the text every fake generates, one word a token.
var words = []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}

// Token is the i-th generated token (0-based).
func Token(i int) string { return words[i%len(words)] }

// Text is the text of the first n generated tokens.
func Text(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(Token(i))
	}
	return b.String()
}

// genCount is how many tokens a generation produces given the request's own
// limit (<= 0: none), and whether the limit cut it short.
func (s *Server) genCount(limit int) (n int, cut bool) {
	n = s.cfg.tokens
	if limit > 0 && limit < n {
		return limit, true
	}
	return n, false
}

// countWords is a rough token count for prompts.
func countWords(ss ...string) int {
	n := 0
	for _, s := range ss {
		n += len(strings.Fields(s))
	}
	if n == 0 {
		n = 1
	}
	return n
}

// embedding is a deterministic unit vector of dim values for text.
func embedding(text string, dim int) []float64 {
	v := make([]float64, dim)
	h := uint64(14695981039346656037)
	for _, c := range []byte(text) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	var sum float64
	for i := range v {
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		v[i] = float64(int64(h%2001)-1000) / 1000
		sum += v[i] * v[i]
	}
	if sum == 0 {
		v[0], sum = 1, 1
	}
	norm := 1 / sqrt(sum)
	for i := range v {
		v[i] *= norm
	}
	return v
}

func sqrt(x float64) float64 {
	z := x
	for i := 0; i < 40; i++ {
		z -= (z*z - x) / (2 * z)
	}
	return z
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomAlnum is n random letters and digits (llama.cpp's random_string).
func randomAlnum(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// newUUID is a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
