package adapter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

// TestEveryKindHasAReclaimer: each config kind links a Reclaimer of its own
// kind, and an unknown kind is an error naming the registered ones.
func TestEveryKindHasAReclaimer(t *testing.T) {
	for _, k := range kinds {
		r, err := adapter.ReclaimerFor(k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if r.Kind() != k {
			t.Errorf("ReclaimerFor(%s).Kind() = %s", k, r.Kind())
		}
	}
	if got := adapter.ReclaimerKinds(); !slices.Equal(got, slices.Sorted(slices.Values(kinds))) {
		t.Errorf("ReclaimerKinds = %v", got)
	}
	if _, err := adapter.ReclaimerFor("vllm"); err == nil || !strings.Contains(err.Error(), "ollama") {
		t.Errorf("unknown kind: %v", err)
	}
}

// TestRegisterReclaimerRefusesMistakes: a registration that would make
// ReclaimerFor ambiguous or wrong panics at init, before anything serves.
func TestRegisterReclaimerRefusesMistakes(t *testing.T) {
	ollama, _ := adapter.ReclaimerFor(config.KindOllama)
	for name, f := range map[string]func(){
		"empty kind":   func() { adapter.RegisterReclaimer("", ollama) },
		"nil":          func() { adapter.RegisterReclaimer("x", nil) },
		"another kind": func() { adapter.RegisterReclaimer(config.KindComfyUI, ollama) },
		"twice":        func() { adapter.RegisterReclaimer(config.KindOllama, ollama) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestAuthorizationPresentsTheCredential: the header value is the gate's
// (Bearer token, or Basic base64(user:secret)), and none without one.
func TestAuthorizationPresentsTheCredential(t *testing.T) {
	bearer := &config.Credential{Scheme: "bearer", Secret: config.NewSecret("tok")}
	basic := &config.Credential{Scheme: "basic", Username: "owner", Secret: config.NewSecret("pa:ss")}
	if got := adapter.Authorization(bearer); got != "Bearer tok" {
		t.Errorf("bearer: %q", got)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("owner:pa:ss"))
	if got := adapter.Authorization(basic); got != want {
		t.Errorf("basic: %q", got)
	}
	if got := adapter.Authorization(nil); got != "" {
		t.Errorf("none: %q", got)
	}
}

// TestUpstreamNeverPrintsTheCredential: every printed form of an Upstream
// hides the Authorization value and the target's userinfo and query.
func TestUpstreamNeverPrintsTheCredential(t *testing.T) {
	u, err := adapter.NewUpstream(config.Upstream{
		ID:         "llm",
		Target:     "http://user:urlpass@127.0.0.1:11434/base?key=querysecret",
		Credential: &config.Credential{Scheme: "bearer", Secret: config.NewSecret("headersecret")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.Authorization.Reveal() != "Bearer headersecret" {
		t.Fatalf("authorization %q", u.Authorization.Reveal())
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "upstream", u)
	outs := []string{fmt.Sprint(u), fmt.Sprintf("%v %+v %#v %s", u, u, u, u), u.String(), buf.String()}
	for _, s := range outs {
		for _, secret := range []string{"headersecret", "urlpass", "querysecret"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q shows %s", s, secret)
			}
		}
	}
	if u.String() != "http://***@127.0.0.1:11434/base?***" {
		t.Errorf("String() = %q", u.String())
	}
	if _, err := adapter.NewUpstream(config.Upstream{ID: "x", Target: "127.0.0.1:80"}, nil); err == nil {
		t.Error("a target without a scheme was accepted")
	}
}

type recorded struct {
	method, path, auth, contentType, body string
}

func recorder(t *testing.T, h http.HandlerFunc) (*httptest.Server, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recorded{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestCallCarriesTheCredentialAndReportsStatus: Call joins the path to the
// target's, sends the credential and a JSON body, decodes 2xx answers and
// turns others into a StatusError that never repeats the credential.
func TestCallCarriesTheCredentialAndReportsStatus(t *testing.T) {
	srv, reqs := recorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/base/ok":
			_, _ = io.WriteString(w, `{"answer": 42}`)
		default:
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "short and\nstout")
		}
	})
	u, err := adapter.NewUpstream(config.Upstream{ID: "x", Target: srv.URL + "/base/",
		Credential: &config.Credential{Scheme: "basic", Username: "owner", Secret: config.NewSecret("s3cret")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Answer int }
	if err := u.Call(context.Background(), "POST", "/ok", map[string]int{"q": 1}, &out); err != nil || out.Answer != 42 {
		t.Fatalf("call: %v %+v", err, out)
	}
	err = u.Call(context.Background(), "GET", "/teapot", nil, nil)
	var se *adapter.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusTeapot || adapter.StatusCode(err) != http.StatusTeapot || se.Body != "short and stout" {
		t.Fatalf("status error: %#v", err)
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte("owner:s3cret"))) {
		t.Errorf("error shows the credential: %v", err)
	}
	got := reqs()
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("owner:s3cret"))
	if len(got) != 2 || got[0] != (recorded{"POST", "/base/ok", wantAuth, "application/json", `{"q":1}`}) ||
		got[1] != (recorded{"GET", "/base/teapot", wantAuth, "", ""}) {
		t.Errorf("requests %+v", got)
	}
	if adapter.StatusCode(errors.New("x")) != 0 {
		t.Error("StatusCode of a plain error")
	}
}

// TestCallIsBoundedWithoutADeadline: a call whose context has no deadline
// still ends when the upstream never answers.
func TestCallIsBoundedWithoutADeadline(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	u, _ := adapter.NewUpstream(config.Upstream{ID: "x", Target: srv.URL}, nil)
	u.Timeout = 50 * time.Millisecond
	if err := u.Call(context.Background(), "GET", "/hang", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging upstream: %v", err)
	}
}

// stub is a Reclaimer whose Loaded answers from a script.
type stub struct {
	mu     sync.Mutex
	answer [][]string
	err    error
}

func (*stub) Kind() string { return "stub" }
func (s *stub) Loaded(context.Context, adapter.Upstream) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	a := s.answer[0]
	if len(s.answer) > 1 {
		s.answer = s.answer[1:]
	}
	return a, nil
}
func (*stub) SameModel(listed, named string) bool {
	return strings.TrimSuffix(listed, ":latest") == strings.TrimSuffix(named, ":latest")
}
func (*stub) Unload(context.Context, adapter.Upstream, []string) error          { return nil }
func (*stub) CancelJob(context.Context, adapter.Upstream, string) (bool, error) { return false, nil }
func (*stub) JobDone(context.Context, adapter.Upstream, string) (bool, error)   { return false, nil }

// TestWaitUnloadedConfirmsByName: it polls Loaded until none of the models
// is listed (matching names the kind's way) and reports what stayed.
func TestWaitUnloadedConfirmsByName(t *testing.T) {
	u := adapter.Upstream{}
	s := &stub{answer: [][]string{{"a:latest", "b:latest", "owner:latest"}, {"b:latest", "owner:latest"}, {"owner:latest"}}}
	still, err := adapter.WaitUnloaded(context.Background(), s, u, []string{"a", "b"})
	if err != nil || still != nil {
		t.Fatalf("WaitUnloaded = %v, %v", still, err)
	}

	s = &stub{answer: [][]string{{"a:latest", "owner:latest"}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	still, err = adapter.WaitUnloaded(ctx, s, u, []string{"a", "b"})
	if !errors.Is(err, context.Canceled) || !slices.Equal(still, []string{"a"}) {
		t.Fatalf("never unloaded: %v, %v", still, err)
	}

	s = &stub{err: errors.New("down")}
	still, err = adapter.WaitUnloaded(ctx, s, u, []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "down") || !slices.Equal(still, []string{"a"}) {
		t.Fatalf("unreachable: %v, %v", still, err)
	}
	if still, err := adapter.StillLoaded(ctx, s, u, nil); still != nil || err != nil {
		t.Fatalf("no models: %v %v", still, err)
	}
}
