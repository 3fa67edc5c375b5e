package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/httperr"
	"github.com/vacancyd/vacancyd/internal/version"
)

func serve(t *testing.T, a *API) string {
	t.Helper()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func do(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Every route names a scope the auth middleware knows, and probes need none.
func TestRouteTable(t *testing.T) {
	a := New(Options{})
	seen := map[string]bool{}
	for _, r := range a.Routes() {
		switch r.Scope {
		case ScopeNone, ScopeRead, ScopeAdmin:
		default:
			t.Errorf("%s: unknown scope %q", r.Pattern(), r.Scope)
		}
		if r.Handler == nil {
			t.Errorf("%s: no handler", r.Pattern())
		}
		if seen[r.Pattern()] {
			t.Errorf("%s: listed twice", r.Pattern())
		}
		seen[r.Pattern()] = true
	}
	for p, scope := range map[string]string{"GET /healthz": ScopeNone, "GET /readyz": ScopeNone, "GET /metrics": ScopeRead} {
		if !seen[p] {
			t.Errorf("route %s missing", p)
		}
		for _, r := range a.Routes() {
			if r.Pattern() == p && r.Scope != scope {
				t.Errorf("%s: scope %q, want %q", p, r.Scope, scope)
			}
		}
	}
}

func TestHealthz(t *testing.T) {
	url := serve(t, New(Options{Ready: func() bool { return false }}))
	resp, body := do(t, http.MethodGet, url+"/healthz")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q, want 200 ok even when not ready", resp.StatusCode, body)
	}
	if resp, _ := do(t, http.MethodHead, url+"/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD /healthz = %d, want 200", resp.StatusCode)
	}
}

// /readyz follows the ReadyFunc and says nothing beyond ready or not.
func TestReadyz(t *testing.T) {
	var ready atomic.Bool
	url := serve(t, New(Options{Ready: ready.Load}))
	resp, body := do(t, http.MethodGet, url+"/readyz")
	if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(body) != "not ready" {
		t.Fatalf("not ready: /readyz = %d %q, want 503 not ready", resp.StatusCode, body)
	}
	ready.Store(true)
	resp, body = do(t, http.MethodGet, url+"/readyz")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Fatalf("ready: /readyz = %d %q, want 200 ready", resp.StatusCode, body)
	}
}

func decodeError(t *testing.T, resp *http.Response, body string) httperr.BodyError {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var b httperr.Body
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", body, err)
	}
	return b.Error
}

// A known path with the wrong method is a JSON 405 with Allow.
func TestMethodNotAllowed(t *testing.T) {
	url := serve(t, New(Options{}))
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
		resp, body := do(t, m, url+"/metrics")
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s /metrics = %d, want 405", m, resp.StatusCode)
		}
		if e := decodeError(t, resp, body); e.Type != "method_not_allowed" {
			t.Errorf("%s /metrics: error type %q", m, e.Type)
		}
		if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
			t.Errorf("%s /metrics: Allow %q, want GET, HEAD", m, allow)
		}
	}
}

// An unknown path is a JSON 404.
func TestNotFound(t *testing.T) {
	url := serve(t, New(Options{}))
	for _, p := range []string{"/", "/nope", "/healthz/extra", "/admin/settings"} {
		resp, body := do(t, http.MethodGet, url+p)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s = %d, want 404", p, resp.StatusCode)
		}
		if e := decodeError(t, resp, body); e.Type != "not_found" {
			t.Errorf("GET %s: error type %q", p, e.Type)
		}
	}
}

// /metrics serves the API's own registry: Go and process collectors, build
// info, and whatever other packages register on Registry().
func TestMetrics(t *testing.T) {
	a := New(Options{})
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "vacancyd_test_events_total", Help: "test"})
	a.Registry().MustRegister(c)
	c.Inc()
	resp, body := do(t, http.MethodGet, serve(t, a)+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d", resp.StatusCode)
	}
	want := []string{
		`vacancyd_build_info{goversion="` + version.GoVersion + `",revision="` + version.Revision + `",version="` + version.Version + `"} 1`,
		"go_goroutines ",
		"vacancyd_test_events_total 1",
		"promhttp_metric_handler_requests_total",
	}
	if runtime.GOOS == "linux" {
		want = append(want, "process_cpu_seconds_total ")
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
}

// Registries are private: two can coexist (the global one would refuse the
// second set of collectors), and nothing lands in the global registry.
func TestRegistryIsNotGlobal(t *testing.T) {
	r1, r2 := NewRegistry(), NewRegistry()
	if r1 == r2 || prometheus.Registerer(r1) == prometheus.DefaultRegisterer {
		t.Fatal("NewRegistry returned a shared registry")
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "vacancyd_") {
			t.Errorf("%s registered globally", mf.GetName())
		}
	}
}

// Wrap sees every route with its scope, and every path once more with its
// strictest requirement for the methods it does not serve; unknown paths
// bypass it.
func TestWrapPerRoute(t *testing.T) {
	wrapped := map[string]string{}
	a := New(Options{Wrap: func(r Route, next http.Handler) http.Handler {
		wrapped[r.Pattern()] = r.Scope
		if r.Scope == ScopeNone {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			httperr.Write(w, &httperr.Error{Status: http.StatusUnauthorized, Type: "unauthorized", Msg: "no", Scope: r.Scope}, nil)
		})
	}})
	url := serve(t, a)
	routes := 0
	for p := range wrapped {
		if !strings.HasPrefix(p, "* ") {
			routes++
		}
	}
	if routes != len(a.Routes()) {
		t.Fatalf("Wrap saw %d routes, want %d", routes, len(a.Routes()))
	}
	if wrapped["* /metrics"] != ScopeRead {
		t.Fatalf("the 405 catch-all of /metrics was wrapped with %q, want read", wrapped["* /metrics"])
	}
	if resp, _ := do(t, http.MethodOptions, url+"/metrics"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("OPTIONS /metrics = %d, want the wrapper's 401 (OPTIONS is never exempt)", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodGet, url+"/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", resp.StatusCode)
	}
	resp, body := do(t, http.MethodGet, url+"/metrics")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics = %d, want the wrapper's 401", resp.StatusCode)
	}
	if e := decodeError(t, resp, body); e.RequiredScope != ScopeRead {
		t.Errorf("required scope %q, want read", e.RequiredScope)
	}
	if resp, _ := do(t, http.MethodGet, url+"/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", resp.StatusCode)
	}
}
