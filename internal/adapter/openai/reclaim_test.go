package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

var bearer = &config.Credential{Scheme: "bearer", Secret: config.NewSecret("llama-key")}

func upstreamOf(t *testing.T, target string) adapter.Upstream {
	t.Helper()
	u, err := adapter.NewUpstream(config.Upstream{ID: "llm", Kind: config.KindOpenAI, Target: target, Credential: bearer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSingleModelServerCannotUnload: a llama-server serving one model lists
// it as loaded and has no unload route, which is ErrUnsupported (not a
// failure); the calls carry the credential.
func TestSingleModelServerCannotUnload(t *testing.T) {
	f := fakeupstream.StartOpenAI(t, fakeupstream.WithBearer("llama-key"), fakeupstream.WithModels("qwen2.5-7b"))
	u := upstreamOf(t, f.URL)
	r := Reclaimer{}
	loaded, err := r.Loaded(waitCtx(t), u)
	if err != nil || !slices.Equal(loaded, []string{f.Model()}) {
		t.Fatalf("Loaded = %v, %v", loaded, err)
	}
	err = r.Unload(waitCtx(t), u, []string{f.Model()})
	if !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Unload: %v", err)
	}
	unloads := f.RequestsTo("/models/unload")
	if len(unloads) != 1 || unloads[0].Status != http.StatusNotFound || unloads[0].Header.Get("Authorization") != "Bearer llama-key" {
		t.Fatalf("unload requests %+v", unloads)
	}
	if err := r.Unload(waitCtx(t), u, nil); err != nil {
		t.Fatalf("nothing to unload: %v", err)
	}
	for _, f := range []func() (bool, error){
		func() (bool, error) { return r.CancelJob(context.Background(), u, "x") },
		func() (bool, error) { return r.JobDone(context.Background(), u, "x") },
	} {
		if _, err := f(); !errors.Is(err, adapter.ErrUnsupported) {
			t.Errorf("job call: %v", err)
		}
	}
}

// router serves the parts of llama-server's router mode that Reclaimer
// uses, as tools/server/server-models.cpp writes them (the fakes have no
// router mode): /v1/models with a status per model, and /models/unload.
type router struct {
	mu     sync.Mutex
	status map[string]string
	asked  []string
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer llama-key" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`)
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/models":
		var data []map[string]any
		for _, id := range []string{"a", "b", "c", "d"} {
			data = append(data, map[string]any{"id": id, "object": "model", "owned_by": "llamacpp",
				"status": map[string]any{"value": rt.status[id], "args": []string{"llama-server"}}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	case "POST /models/unload":
		var body struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		rt.asked = append(rt.asked, body.Model)
		st, ok := rt.status[body.Model]
		switch {
		case !ok:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"code":400,"message":"model is not found","type":"invalid_request_error"}}`)
		case st != "loaded" && st != "loading":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"code":400,"message":"model is not running","type":"invalid_request_error"}}`)
		default:
			rt.status[body.Model] = "unloaded"
			_, _ = io.WriteString(w, `{"success":true}`)
		}
	default:
		http.NotFound(w, r)
	}
}

// TestRouterModeUnloads: in router mode only loaded (and loading) models
// count as loaded; unloading one the router does not run, or does not
// know, is not an error.
func TestRouterModeUnloads(t *testing.T) {
	rt := &router{status: map[string]string{"a": "loaded", "b": "unloaded", "c": "loading", "d": "sleeping"}}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	u := upstreamOf(t, srv.URL)
	r := Reclaimer{}
	if loaded, err := r.Loaded(waitCtx(t), u); err != nil || !slices.Equal(loaded, []string{"a", "c"}) {
		t.Fatalf("Loaded = %v, %v", loaded, err)
	}
	if err := r.Unload(waitCtx(t), u, []string{"a", "b", "zzz", "a"}); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	asked := slices.Clone(rt.asked)
	rt.mu.Unlock()
	if !slices.Equal(asked, []string{"a", "b", "zzz"}) {
		t.Fatalf("asked %v", asked)
	}
	if still, err := adapter.WaitUnloaded(waitCtx(t), r, u, []string{"a"}); err != nil || still != nil {
		t.Fatalf("WaitUnloaded = %v, %v", still, err)
	}
}

// TestUnloadFailures: a server without the route (vLLM's FastAPI 404) is
// ErrUnsupported; a server error is a plain failure.
func TestUnloadFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/models/unload" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	u := upstreamOf(t, srv.URL)
	if err := (Reclaimer{}).Unload(waitCtx(t), u, []string{"m"}); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("vLLM: %v", err)
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	err := (Reclaimer{}).Unload(waitCtx(t), upstreamOf(t, broken.URL), []string{"m"})
	if err == nil || errors.Is(err, adapter.ErrUnsupported) || adapter.StatusCode(err) != http.StatusInternalServerError {
		t.Fatalf("server error: %v", err)
	}
	if _, err := (Reclaimer{}).Loaded(waitCtx(t), upstreamOf(t, broken.URL)); adapter.StatusCode(err) != http.StatusInternalServerError {
		t.Fatalf("Loaded: %v", err)
	}
}
