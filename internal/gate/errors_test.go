package gate_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

var lendingPauser = lending.Pauser{Via: "test"}

func generateReq(prompt string) *ollama.GenerateRequest {
	f := false
	return &ollama.GenerateRequest{Model: "llama3.2", Prompt: prompt, Stream: &f}
}

func ignoreGenerate(ollama.GenerateResponse) error { return nil }

// inferenceReq is a valid inference request for kind, as alice.
func inferenceReq(kind string) req {
	var path string
	var v any
	switch kind {
	case config.KindOllama:
		path, v = "/api/generate", map[string]any{"model": "llama3.2", "prompt": "hi", "stream": false}
	case config.KindOpenAI:
		path, v = "/v1/chat/completions", map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	case config.KindComfyUI:
		path, v = "/prompt", map[string]any{"prompt": fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "x"), "client_id": "c"}
	case config.KindChatterbox:
		path, v = "/v1/audio/speech", map[string]any{"model": "chatterbox", "input": "hello", "voice": fakeupstream.DefaultChatterboxVoices[0]}
	}
	b, _ := json.Marshal(v)
	return req{method: "POST", path: path, token: aliceToken, body: b}
}

// readReq is a borrower read for kind.
func readReq(kind string) req {
	p := map[string]string{
		config.KindOllama: "/api/tags", config.KindOpenAI: "/v1/models",
		config.KindComfyUI: "/object_info", config.KindChatterbox: "/get_predefined_voices",
	}[kind]
	return req{method: "GET", path: p, token: aliceToken}
}

// TestUpstreamDown: an unreachable upstream is a 502 in that upstream's
// own error style, counted as upstream_error; borrower reads fail the same
// way.
func TestUpstreamDown(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := startGate(t, gateConfig{kind: kind, target: deadTarget(t)})
			for _, r := range []req{inferenceReq(kind), readReq(kind)} {
				res := e.do(t, r)
				if res.status != http.StatusBadGateway {
					t.Fatalf("%s %s: %d %s", r.method, r.path, res.status, res.body)
				}
				errorMessage(t, kind, res.body, "upstream_unavailable")
			}
			e.waitCounter(t, gate.OutcomeUpstreamError, 2)
			if !strings.Contains(e.Log.String(), "upstream failed") {
				t.Fatalf("the failure is not logged:\n%s", e.Log.String())
			}
		})
	}
}

// TestNotLending: while lending is paused, or the resource is switched
// off, inference is a 503 with Retry-After and the reason, in the
// upstream's own error shape, and reaches nothing; borrower reads still
// work.
func TestNotLending(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			fake := fakeupstream.Start(t, fakeupstream.Kind(kind))
			e := startGate(t, gateConfig{kind: kind, target: fake.URL, retryAfter: 42 * time.Second})
			for _, c := range []struct {
				off, on func()
				reason  lending.Reason
			}{
				{func() { e.Switches.Pause(lendingPauser) }, func() { e.Switches.Resume() }, lending.ReasonLendingPaused},
				{func() { _ = e.Switches.SetResource(resourceID, false) }, func() { _ = e.Switches.SetResource(resourceID, true) }, lending.ReasonResourceDisabled},
			} {
				c.off()
				before := fake.Count()
				res := e.do(t, inferenceReq(kind))
				if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") != "42" {
					t.Fatalf("%s: %d Retry-After %q %s", c.reason, res.status, res.header.Get("Retry-After"), res.body)
				}
				if msg := errorMessage(t, kind, res.body, string(c.reason)); !strings.Contains(msg, string(c.reason)) {
					t.Fatalf("%s: message %q does not name the reason", c.reason, msg)
				}
				if fake.Count() != before {
					t.Fatalf("%s: the refused request reached the upstream", c.reason)
				}
				if res := e.do(t, readReq(kind)); res.status != http.StatusOK {
					t.Fatalf("%s: borrower read %d %s", c.reason, res.status, res.body)
				}
				c.on()
				e.waitLendable(t)
				if res := e.do(t, inferenceReq(kind)); res.status != http.StatusOK {
					t.Fatalf("after %s ended: %d %s", c.reason, res.status, res.body)
				}
			}
			e.waitCounter(t, gate.OutcomeNotLending, 2)
		})
	}
}

// TestOllamaKeepAliveCapped: a borrower asking Ollama to keep a model
// loaded for a day (or forever, or by default) gets the gate's cap: the
// fake's loaded-model table shows the capped expiry.
func TestOllamaKeepAliveCapped(t *testing.T) {
	const limit = 90 * time.Second
	fake := fakeupstream.StartOllama(t, fakeupstream.WithDefaultKeepAlive(24*time.Hour)) // the owner's OLLAMA_KEEP_ALIVE
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, maxKeepAlive: limit})
	c := ollamaClient(t, e, aliceToken)
	for _, ka := range []*ollama.Duration{{Duration: 24 * time.Hour}, {Duration: -1}, nil} {
		r := generateReq("hi")
		r.KeepAlive = ka
		start := time.Now()
		if err := c.Generate(waitCtx(t), r, ignoreGenerate); err != nil {
			t.Fatal(err)
		}
		loaded := fake.Loaded()
		if len(loaded) != 1 {
			t.Fatalf("keep_alive %v: loaded %+v", ka, loaded)
		}
		l := loaded[0]
		if l.Forever || l.KeepAlive != limit || l.ExpiresAt.After(time.Now().Add(limit)) || l.ExpiresAt.Before(start) {
			t.Fatalf("keep_alive %v: loaded %+v, want expiry within %v", ka, l, limit)
		}
	}
	// A shorter keep_alive is the borrower's to choose.
	r := generateReq("hi")
	r.KeepAlive = &ollama.Duration{Duration: 30 * time.Second}
	if err := c.Generate(waitCtx(t), r, ignoreGenerate); err != nil {
		t.Fatal(err)
	}
	if l := fake.Loaded(); len(l) != 1 || l[0].KeepAlive != 30*time.Second {
		t.Fatalf("short keep_alive: %+v", l)
	}
}

// TestOllamaUnloadIsManagement: keep_alive 0 with nothing to run is an
// unload, refused as management (the owner's model stays loaded) unless
// management = "allow".
func TestOllamaUnloadIsManagement(t *testing.T) {
	fake := fakeupstream.StartOllama(t)
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL})
	c := ollamaClient(t, e, aliceToken)
	if err := c.Generate(waitCtx(t), generateReq("load it"), ignoreGenerate); err != nil {
		t.Fatal(err)
	}
	before := fake.Count()
	for _, r := range []req{
		{method: "POST", path: "/api/generate", body: []byte(`{"model":"llama3.2","keep_alive":0}`)},
		{method: "POST", path: "/api/chat", body: []byte(`{"model":"llama3.2","messages":[],"keep_alive":"0s"}`)},
		{method: "POST", path: "/api/generate", body: []byte(`{"model":"gpt-oss:120b-cloud","prompt":"hi"}`)},
	} {
		r.token = aliceToken
		res := e.do(t, r)
		if res.status != http.StatusForbidden {
			t.Fatalf("%s %s: %d %s", r.path, r.body, res.status, res.body)
		}
		errorMessage(t, config.KindOllama, res.body, "management_denied")
	}
	// The official client's unload path: Generate with keep_alive 0 and no prompt.
	err := c.Generate(waitCtx(t), &ollama.GenerateRequest{Model: "llama3.2", KeepAlive: &ollama.Duration{}}, ignoreGenerate)
	var se ollama.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusForbidden {
		t.Fatalf("client unload: %v", err)
	}
	if fake.Count() != before || len(fake.Loaded()) != 1 {
		t.Fatalf("an unload reached the upstream: %d requests, loaded %+v", fake.Count()-before, fake.Loaded())
	}
	e.waitCounter(t, gate.OutcomeManagement, 4)

	allow := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, management: "allow"})
	if err := ollamaClient(t, allow, aliceToken).Generate(waitCtx(t), &ollama.GenerateRequest{Model: "llama3.2", KeepAlive: &ollama.Duration{}}, ignoreGenerate); err != nil {
		t.Fatal(err)
	}
	if l := fake.Loaded(); len(l) != 0 {
		t.Fatalf("allowed unload left %+v", l)
	}
}

// TestUpstreamBreaksMidStream: an upstream that dies mid-answer cuts the
// borrower's stream (it cannot end cleanly: the borrower must not take a
// truncated answer for a whole one), and the request is counted as an
// upstream error with the in-flight gauge back to 0.
func TestUpstreamBreaksMidStream(t *testing.T) {
	_, target := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"model":"llama3.2","response":"The","done":false}`+"\n")
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}), testLimits(), discardLog)
	e := startGate(t, gateConfig{kind: config.KindOllama, target: target})
	hr, _ := http.NewRequestWithContext(waitCtx(t), "POST", e.URL+"/api/generate", strings.NewReader(`{"model":"llama3.2","prompt":"hi"}`))
	hr.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := e.client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("a broken stream ended cleanly: %q", b)
	}
	if !strings.Contains(string(b), `"response":"The"`) {
		t.Fatalf("the first chunk did not arrive: %q", b)
	}
	e.waitCounter(t, gate.OutcomeUpstreamError, 1)
	eventually(t, "in-flight gauge back to 0", func() bool { return e.inFlight(t) == 0 })
}

// TestUpdateAppliesToNewRequests: Update (a settings change) swaps the
// target and the management policy for requests that start afterwards; a
// stream already running finishes on the upstream it started on. The id
// and kind cannot change.
func TestUpdateAppliesToNewRequests(t *testing.T) {
	old := fakeupstream.StartOllama(t, fakeupstream.WithTokens(3))
	next := fakeupstream.StartOllama(t)
	e := startGate(t, gateConfig{kind: config.KindOllama, target: old.URL})
	c := ollamaClient(t, e, aliceToken)

	release := old.Hold()
	done := make(chan error, 1)
	var text strings.Builder
	go func() {
		done <- c.Generate(waitCtx(t), &ollama.GenerateRequest{Model: "llama3.2", Prompt: "hi"}, func(r ollama.GenerateResponse) error {
			text.WriteString(r.Response)
			return nil
		})
	}()
	if err := old.WaitRequests(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	o := e.Options
	o.Upstream.Target, o.Upstream.Management = next.URL, "allow"
	if err := e.Gate.Update(o); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil || text.String() != fakeupstream.Text(3) {
		t.Fatalf("the running stream: %q %v", text.String(), err)
	}
	if res := e.get(t, "/api/ps"); res.status != http.StatusOK {
		t.Fatalf("management after allowing it: %d %s", res.status, res.body)
	}
	if old.Count() != 1 || next.Count() != 1 || next.RequestsTo("/api/ps") == nil {
		t.Fatalf("old upstream %d requests, new %d", old.Count(), next.Count())
	}
	o.Upstream.ID = "renamed"
	if err := e.Gate.Update(o); err == nil {
		t.Fatal("Update accepted a new upstream id")
	}
}

// A reclaim that cancels a request before the upstream has answered gives
// the borrower a 503 naming the reclaim, in the upstream's own shape, not
// an empty answer.
func TestReclaimBeforeTheAnswerStarts(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(4))
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, retryAfter: 9 * time.Second})
	release := fake.Hold()
	defer release()
	got := make(chan result, 1)
	go func() {
		got <- e.do(t, req{method: "POST", path: "/api/generate", token: aliceToken, body: []byte(`{"model":"llama3.2","prompt":"hi","stream":false}`)})
	}()
	if err := fake.WaitRequests(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	e.Switches.Pause(lendingPauser)
	res := <-got
	if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") != "9" {
		t.Fatalf("reclaimed before the answer: %d Retry-After %q %s", res.status, res.header.Get("Retry-After"), res.body)
	}
	if msg := errorMessage(t, config.KindOllama, res.body, "reclaiming"); !strings.Contains(msg, "reclaimed") {
		t.Fatalf("message %q", msg)
	}
	e.waitCounter(t, gate.OutcomeReclaimed, 1)
}

// Work admitted and then refused by ComfyUI ownership rules does not stay
// registered as running.
func TestRefusedAfterAdmissionLeavesNoWork(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(1))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	res := e.do(t, req{method: "POST", path: "/prompt", token: aliceToken, body: []byte(`{"prompt": {}, "client_id": 7}`)})
	if res.status != http.StatusBadRequest {
		t.Fatalf("bad client_id: %d %s", res.status, res.body)
	}
	if w := e.Engine.Status().Work; len(w) != 0 {
		t.Fatalf("work left registered: %+v", w)
	}
}
