package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/vacancyd/vacancyd/internal/testutil/syncbuf"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"github.com/vacancyd/vacancyd/internal/adapter"
	_ "github.com/vacancyd/vacancyd/internal/adapter/all" // every upstream kind
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer = syncbuf.Buffer

// Test secrets. Tests assert that the borrow tokens never reach an upstream
// and that the upstream secret never reaches a borrower or a log line.
const (
	aliceToken     = "alice-borrow-token-0123456789abcdefghij"
	bobToken       = "bob-borrow-token-0123456789abcdefghijkl"
	readerToken    = "reader-only-token-0123456789abcdefghijk"
	upstreamSecret = "upstream-secret-Zq8xW2pL7vN4kR1"
	resourceID     = "gpu0"
)

var discardLog = slog.New(slog.DiscardHandler)

var kinds = []string{config.KindOllama, config.KindOpenAI, config.KindComfyUI, config.KindChatterbox}

// waitCtx bounds a wait so that a broken gate fails the test instead of
// hanging it; nothing is asserted about how long anything takes.
func waitCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test if it never does
// within a generous bound (a hang guard, not a timing assertion).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testLimits are small, so that limit tests run quickly; the timeouts are
// generous wherever a test does not exercise them.
func testLimits() config.Limits {
	return config.Limits{
		MaxConnections:      512,
		HeaderTimeout:       config.D(10 * time.Second),
		MaxBodyBytes:        1 << 20,
		BodyTimeout:         config.D(20 * time.Second),
		ResponseIdleTimeout: config.D(20 * time.Second),
		IdleTimeout:         config.D(30 * time.Second),
		BodyBudgetBytes:     64 << 20,
	}
}

func testAuth() config.Auth {
	tok := func(name, value string, scopes ...string) config.Token {
		return config.Token{Name: name, Scopes: scopes, Value: config.NewSecret(value), Secret: config.NewSecret(value)}
	}
	// trust_loopback off: the tests run over loopback and every request
	// must present a token, as a LAN borrower would.
	return config.Auth{Tokens: []config.Token{
		tok("alice", aliceToken, "borrow"),
		tok("bob", bobToken, "borrow"),
		tok("reader", readerToken, "read"),
	}}
}

// gateConfig is what a test varies about one gate.
type gateConfig struct {
	kind         string
	target       string
	management   string
	forwardAuth  bool
	credential   *config.Credential
	limits       *config.Limits
	maxKeepAlive time.Duration
	retryAfter   time.Duration
	switches     *lending.Switches
	// shared, when set, is the budget and metrics of other gates (the
	// daemon shares them across every gate).
	shared *gateEnv
	// infoLog logs at Info, as the daemon does by default, instead of
	// keeping every Debug line for the test to read.
	infoLog bool
}

// gateEnv is one gate served on a real loopback listener with the daemon's
// server settings, and what the test reads back from it.
type gateEnv struct {
	ID       string
	Kind     string
	URL      string
	Addr     string
	Gate     *gate.Gate
	Reg      *prometheus.Registry
	Metrics  *gate.Metrics
	Budget   *gate.Budget
	Switches *lending.Switches
	// Engine admits work: a headless lending engine over Switches, so that
	// pausing or switching the resource off refuses at once, as in the daemon.
	Engine *lending.Engine
	Log    *syncBuffer
	Limits config.Limits
	// Options are what the gate was built with, for tests of Update.
	Options gate.Options
	client  *http.Client
}

var gateSeq struct {
	mu sync.Mutex
	n  int
}

func startGate(t testing.TB, c gateConfig) *gateEnv {
	t.Helper()
	lim := testLimits()
	if c.limits != nil {
		lim = *c.limits
	}
	gateSeq.mu.Lock()
	gateSeq.n++
	id := fmt.Sprintf("%s-%d", c.kind, gateSeq.n)
	gateSeq.mu.Unlock()

	e := &gateEnv{ID: id, Kind: c.kind, Limits: lim, Switches: c.switches, Log: &syncBuffer{}}
	if e.Switches == nil {
		e.Switches = lending.NewSwitches(true, map[string]bool{resourceID: true})
	}
	level := slog.LevelDebug
	if c.infoLog {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(e.Log, &slog.HandlerOptions{Level: level}))
	if c.shared != nil {
		e.Reg, e.Metrics, e.Budget = c.shared.Reg, c.shared.Metrics, c.shared.Budget
	} else {
		e.Reg = prometheus.NewRegistry()
		e.Budget = gate.NewBudget(lim.BodyBudgetBytes)
		m, err := gate.NewMetrics(e.Reg, e.Budget)
		if err != nil {
			t.Fatal(err)
		}
		e.Metrics = m
	}
	e.Engine = startEngine(t, e.Switches, log)
	authn, err := auth.New(testAuth(), auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ad, err := adapter.For(c.kind, adapter.Options{MaxKeepAlive: c.maxKeepAlive})
	if err != nil {
		t.Fatal(err)
	}
	mgmt := c.management
	if mgmt == "" {
		mgmt = "deny"
	}
	retry := c.retryAfter
	if retry == 0 {
		retry = 7 * time.Second
	}
	e.Options = gate.Options{
		Upstream: config.Upstream{
			ID: id, Kind: c.kind, Target: c.target, Resource: resourceID, Management: mgmt,
			ForwardAuthorization: c.forwardAuth, MaxKeepAlive: config.D(c.maxKeepAlive), Credential: c.credential,
		},
		Limits:     lim,
		Auth:       authn,
		Adapter:    ad,
		Admitter:   e.Engine,
		Budget:     e.Budget,
		Metrics:    e.Metrics,
		RetryAfter: retry,
		Transport:  gate.NewTransport(),
		Log:        log,
	}
	g, err := gate.New(e.Options)
	if err != nil {
		t.Fatal(err)
	}
	e.Gate = g
	e.Addr, e.URL = serve(t, g, lim, log)
	e.client = &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 16},
		Timeout:   30 * time.Second,
	}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// serve runs h on a fresh loopback listener with the settings the daemon
// gives every listener (internal/daemon/listener.go): the connection cap,
// the header read timeout and the keep-alive idle timeout.
func serve(t testing.TB, h http.Handler, lim config.Limits, log *slog.Logger) (addr, url string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.HeaderTimeout.Duration,
		IdleTimeout:       lim.IdleTimeout.Duration,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() { _ = srv.Serve(netutil.LimitListener(ln, lim.MaxConnections)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), "http://" + ln.Addr().String()
}

// result is a complete response.
type result struct {
	status int
	header http.Header
	body   []byte
}

// req describes a request to a gate. token goes in Authorization as a
// bearer token, or in X-Api-Key when apiKey is set.
type req struct {
	method, path string
	token        string
	apiKey       bool
	body         []byte
	header       http.Header
}

func (e *gateEnv) do(t testing.TB, r req) result {
	t.Helper()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(waitCtx(t), r.method, e.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range r.header {
		hr.Header[k] = vs
	}
	if r.body != nil && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		if r.apiKey {
			hr.Header.Set("X-Api-Key", r.token)
		} else {
			hr.Header.Set("Authorization", "Bearer "+r.token)
		}
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", r.method, r.path, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// get is a GET as alice.
func (e *gateEnv) get(t testing.TB, path string) result {
	t.Helper()
	return e.do(t, req{method: "GET", path: path, token: aliceToken})
}

// counter reads vacancyd_requests_total{upstream=e.ID,outcome}.
func (e *gateEnv) counter(t testing.TB, outcome string) float64 {
	t.Helper()
	return e.metric(t, "vacancyd_requests_total", map[string]string{"upstream": e.ID, "outcome": outcome})
}

// inFlight reads vacancyd_requests_in_flight{upstream=e.ID}.
func (e *gateEnv) inFlight(t testing.TB) float64 {
	t.Helper()
	return e.metric(t, "vacancyd_requests_in_flight", map[string]string{"upstream": e.ID})
}

func (e *gateEnv) metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := e.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// waitCounter waits until the outcome's counter reaches want. The gate
// counts an admitted request once its handler returns, which may be just
// after the client has read the whole answer.
func (e *gateEnv) waitCounter(t testing.TB, outcome string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.counter(t, outcome) < want {
		if time.Now().After(deadline) {
			counts := map[string]float64{}
			for _, o := range gate.Outcomes {
				counts[o] = e.counter(t, o)
			}
			t.Fatalf("vacancyd_requests_total{upstream=%s,outcome=%s} never reached %v: %v, in flight %v",
				e.ID, outcome, want, counts, e.inFlight(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := e.counter(t, outcome); got != want {
		t.Fatalf("%s counter %v, want %v", outcome, got, want)
	}
}

// errorMessage checks that body is an error in kind's own JSON shape and
// returns its human message. errType is checked where the shape carries a
// type (OpenAI, ComfyUI).
// errorShapeOf is the kind whose error shape answers path: Ollama's
// OpenAI-compatible /v1 routes answer in OpenAI's shape.
func errorShapeOf(kind, path string) string {
	if kind == config.KindOllama && strings.HasPrefix(path, "/v1/") {
		return config.KindOpenAI
	}
	return kind
}

func errorMessage(t testing.TB, kind string, body []byte, errType string) string {
	t.Helper()
	switch kind {
	case config.KindOllama:
		// Ollama: {"error": "..."} (gin.H{"error": ...}); api.StatusError.
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil || len(v) != 1 {
			t.Fatalf("ollama error body %s: want exactly {\"error\": ...}", body)
		}
		s, ok := v["error"].(string)
		if !ok || s == "" {
			t.Fatalf("ollama error body %s: error is not a string", body)
		}
		return s
	case config.KindOpenAI:
		// OpenAI: {"error": {"message","type","param","code"}}.
		var v struct {
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal(body, &v); err != nil || v.Error == nil {
			t.Fatalf("openai error body %s", body)
		}
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := v.Error[k]; !ok {
				t.Fatalf("openai error body %s lacks error.%s", body, k)
			}
		}
		if v.Error["type"] != errType || v.Error["code"] != errType {
			t.Fatalf("openai error body %s: type/code want %q", body, errType)
		}
		return v.Error["message"].(string)
	case config.KindComfyUI:
		// ComfyUI: {"error": {"type","message","details","extra_info"}, "node_errors": {}}.
		var v struct {
			Error      map[string]any  `json:"error"`
			NodeErrors *map[string]any `json:"node_errors"`
		}
		if err := json.Unmarshal(body, &v); err != nil || v.Error == nil || v.NodeErrors == nil {
			t.Fatalf("comfyui error body %s", body)
		}
		for _, k := range []string{"type", "message", "details", "extra_info"} {
			if _, ok := v.Error[k]; !ok {
				t.Fatalf("comfyui error body %s lacks error.%s", body, k)
			}
		}
		if v.Error["type"] != errType {
			t.Fatalf("comfyui error body %s: type want %q", body, errType)
		}
		return v.Error["message"].(string)
	case config.KindChatterbox:
		// FastAPI: {"detail": "..."}.
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil || len(v) != 1 {
			t.Fatalf("chatterbox error body %s: want exactly {\"detail\": ...}", body)
		}
		s, ok := v["detail"].(string)
		if !ok || s == "" {
			t.Fatalf("chatterbox error body %s: detail is not a string", body)
		}
		return s
	}
	t.Fatalf("unknown kind %s", kind)
	return ""
}

// bearerTransport adds a borrower's token to every request, as a borrower
// configures an SDK's HTTP client.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	base := b.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

func borrowerClient(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, base: &http.Transport{Proxy: nil}}, Timeout: 60 * time.Second}
}

// startEngine runs a headless lending engine (no presence input) over sw and
// waits for its first decision.
func startEngine(t testing.TB, sw *lending.Switches, log *slog.Logger) *lending.Engine {
	t.Helper()
	eng := lending.NewEngine(lending.EngineOptions{
		Policy:    lending.Policy{CancelTimeout: 2 * time.Second},
		Switches:  sw,
		Resources: []string{resourceID},
		Log:       log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := eng.Status().Resources[resourceID]; ok {
			return eng
		}
		if time.Now().After(deadline) {
			t.Fatal("the lending engine made no decision")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLendable waits until the engine lends again: after a pause or a
// switched-off resource ends, the engine first finishes its reclaim.
func (e *gateEnv) waitLendable(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok, _ := e.Engine.Admit(resourceID); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine did not lend again")
		}
		time.Sleep(time.Millisecond)
	}
}
