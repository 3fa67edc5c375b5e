//go:build linux

package e2e

// Real-Ollama tests of what keeps the owner and Ollama safe: reclaim
// cancels and unloads, paused lending refuses cleanly, and a borrower's
// token never reaches Ollama.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

// Reclaim: a borrower's long generation is streaming when the owner takes
// the GPU back (pausing lending over loopback, or a session report of
// activity). The stream ends; the gate hung up on Ollama's unfinished
// answer and Ollama ended the request; the reclaim unloaded the borrowed
// model, so Ollama's own /api/ps is empty; vacancyd counts the request as
// reclaimed and records the reclaim.
func TestRealOllamaReclaimCancelsAndUnloads(t *testing.T) {
	for _, tc := range []struct {
		name, presence, reason string
		setup, trigger         func(t *testing.T, e *roEnv)
	}{
		{
			name: "pause over loopback", reason: "lending_paused",
			trigger: func(t *testing.T, e *roEnv) { e.pause(t) },
		},
		{
			name: "session report", reason: "owner_present", presence: `sources = ["session"]`,
			setup:   func(t *testing.T, e *roEnv) { e.reportPresence(t, 3600) },
			trigger: func(t *testing.T, e *roEnv) { e.reportPresence(t, 0) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := roStart(t, roSetup{
				lending:  "idle_after = \"10s\"\nreclaim_grace = \"1s\"\nunload_timeout = \"10s\"",
				presence: tc.presence,
			})
			if tc.setup != nil {
				tc.setup(t, e)
			}
			e.waitLendable(t)
			g := e.gate("ollama")
			c := e.ollamaClient("ollama")

			const marker = "a very long story"
			first := make(chan struct{})
			result := make(chan error, 1)
			var sawDone bool
			tokens := 0
			ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
			defer cancel()
			go func() {
				result <- c.Generate(ctx, &ollama.GenerateRequest{Model: roModel, Prompt: marker,
					Options: map[string]any{"num_predict": -1}},
					func(r ollama.GenerateResponse) error {
						if r.Done {
							sawDone = true
						}
						if tokens++; tokens == 1 {
							close(first)
						}
						return nil
					})
			}()
			select {
			case <-first:
			case err := <-result:
				t.Fatalf("the borrowed generation ended before its first token: %v", err)
			case <-time.After(patience):
				t.Fatal("no first token of the borrowed generation")
			}
			if ps := e.ollama.Loaded(t); len(ps) != 1 || ps[0].Name != roModel+":latest" {
				t.Fatalf("Ollama's /api/ps while borrowed: %+v", ps)
			}
			if w := e.status(t).State.Work; len(w) != 1 || w[0].Borrower != "borrower" || w[0].State != "running" || !strings.HasPrefix(w[0].Model, roModel) {
				t.Fatalf("/status work while borrowed: %+v", w)
			}

			mark := e.ollama.Log.Mark()
			tc.trigger(t, e)

			select {
			case err := <-result:
				// Ollama's client ignores its reader's error, so a cut
				// stream may return nil; the missing final chunk shows it.
				t.Logf("the borrowed stream ended after %d chunks: %v", tokens, err)
			case <-time.After(patience):
				t.Fatal("the borrowed stream never ended: the reclaim did not cancel it")
			}
			if sawDone {
				t.Fatal("the borrowed generation ran to its end instead of being cancelled")
			}
			e.assertCutByGate(t, g.tap, marker, "/api/generate", `"done":true`)

			// The unload reached Ollama and worked.
			e.ollama.WaitUnloaded(t)
			if !strings.Contains(e.ollama.Log.Since(mark), "runner released") {
				t.Error("Ollama's log shows no runner released after the reclaim")
			}
			var unload *realollama.Exchange
			for _, ex := range g.tap.Exchanges() {
				var body struct {
					Model     string          `json:"model"`
					Prompt    *string         `json:"prompt"`
					KeepAlive json.RawMessage `json:"keep_alive"`
				}
				if ex.Path == "/api/generate" && json.Unmarshal(ex.Body, &body) == nil && body.Prompt == nil && string(body.KeepAlive) == "0" {
					unload = &ex
				}
			}
			if unload == nil || unload.Status != http.StatusOK || !strings.Contains(string(unload.Answer), `"done_reason":"unload"`) {
				t.Fatalf("no unload that Ollama carried out among the gate's upstream requests: %+v", unload)
			}

			var st roStatus
			roWait(t, "the reclaim record", func() bool {
				st = e.status(t)
				return st.State.Resources["gpu0"].LastReclaim != nil
			})
			lr := st.State.Resources["gpu0"].LastReclaim
			if lr.Reason != tc.reason || lr.Cancelled != 1 || lr.Held != 0 || len(lr.UnloadErrors) != 0 {
				t.Fatalf("last_reclaim = %+v, want reason %s, one cancelled, none held, no unload errors", *lr, tc.reason)
			}
			if len(st.State.Work) != 0 {
				t.Fatalf("/status still lists work: %+v", st.State.Work)
			}
			roWait(t, "the reclaimed request to be counted", func() bool { return e.requests(t, "ollama", "reclaimed") == 1 })
		})
	}
}

// Paused lending: Ollama's client (and the OpenAI client) get a clean 503
// naming the reason, with Retry-After, and no request reaches Ollama:
// neither its request log nor the tap sees anything. Model discovery still
// passes.
func TestRealOllamaPausedLendingRefusesCleanly(t *testing.T) {
	e := roStart(t, roSetup{})
	e.waitLendable(t)
	e.pause(t)
	roWait(t, "lending to be paused", func() bool { return !e.status(t).Lending.Enabled })
	g := e.gate("ollama")
	mark := e.ollama.Log.Mark()
	before := e.requests(t, "ollama", "not_lending")

	c := e.ollamaClient("ollama")
	err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "hi"}, func(ollama.GenerateResponse) error {
		t.Error("a token arrived while lending is paused")
		return nil
	})
	var se ollama.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || !strings.Contains(se.ErrorMessage, "lending_paused") {
		t.Fatalf("generate while paused: %T %v, want a 503 api.StatusError naming lending_paused", err, err)
	}
	err = c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel, Messages: []ollama.Message{{Role: "user", Content: "hi"}}},
		func(ollama.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("chat while paused: %T %v, want a 503 api.StatusError", err, err)
	}
	r := e.post(t, "http://"+g.addr+"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("raw /v1/chat/completions while paused = %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}
	t.Run("openai client", func(t *testing.T) {
		oc := e.openaiClient("ollama")
		_, err := oc.Chat.Completions.New(roCtx(t), openai.ChatCompletionNewParams{
			Model: roModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var oe *openai.Error
		switch {
		case errors.As(err, &oe):
			// The gate answers Ollama's /v1 routes in OpenAI's error shape,
			// as Ollama's own /v1 routes do.
			if oe.StatusCode != http.StatusServiceUnavailable || oe.Code != "lending_paused" {
				t.Fatalf("OpenAI client while paused: status %d code %q, want 503 lending_paused", oe.StatusCode, oe.Code)
			}
		default:
			t.Fatalf("OpenAI client while paused: %T %v, want a 503 openai.Error with code lending_paused", err, err)
		}
	})
	r = e.post(t, "http://"+g.addr+"/api/generate", `{"model":"tiny","prompt":"hi"}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("raw generate while paused = %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}

	if got := e.requests(t, "ollama", "not_lending") - before; got != 5 {
		t.Errorf("not_lending moved by %v, want 5", got)
	}
	if n := len(g.tap.Conns()); n != 0 {
		t.Fatalf("the gate opened %d connections to Ollama while lending is paused", n)
	}
	if rs := realollama.Requests(e.ollama.Log.Since(mark)); len(rs) != 0 {
		t.Fatalf("requests reached Ollama while lending is paused: %+v", rs)
	}
	if ps := e.ollama.Loaded(t); len(ps) != 0 {
		t.Fatalf("a model is loaded although nothing was lent: %+v", ps)
	}

	// Reads do not use the GPU and pass.
	if _, err := c.List(roCtx(t)); err != nil {
		t.Fatalf("List while paused: %v", err)
	}
	if n := realollama.Count(realollama.Requests(e.ollama.Log.Since(mark)), http.MethodGet, "/api/tags"); n != 1 {
		t.Fatalf("List while paused reached Ollama %d times", n)
	}
}

// The borrower's token never reaches Ollama, presented either way, and
// never appears in either log. A gate with forward_authorization = true is
// the control: its tap does see the token, so the check can see one.
func TestRealOllamaBorrowerTokenNeverReachesOllama(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{
		{id: "ollama", management: "deny"},
		{id: "ollama-forward", management: "deny", forwardAuth: true},
	}})
	e.waitLendable(t)
	stream := false
	gen := func(c *ollama.Client) {
		t.Helper()
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "secret", Stream: &stream,
			Options: map[string]any{"num_predict": 2}}, func(ollama.GenerateResponse) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	gen(e.ollamaClient("ollama"))
	gen(e.ollamaClient("ollama-forward"))
	if _, err := e.ollamaClient("ollama").List(roCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The other header a borrower may use.
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.gate("ollama").addr+"/api/generate",
		strings.NewReader(`{"model":"tiny","prompt":"key","stream":false,"options":{"num_predict":2}}`))
	req.Header.Set("X-Api-Key", e.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("generate with X-Api-Key = %d", resp.StatusCode)
	}

	plain := e.gate("ollama").tap
	ex := plain.Exchanges()
	if len(ex) != 3 {
		t.Fatalf("the gate made %d upstream requests, want 3", len(ex))
	}
	for _, x := range ex {
		if x.Header.Get("Authorization") != "" || x.Header.Get("X-Api-Key") != "" {
			t.Fatalf("%s %s reached Ollama with a credential header (headers %v)", x.Method, x.Path, slices.Sorted(maps.Keys(x.Header)))
		}
	}
	if strings.Contains(string(plain.Sent()), e.token) {
		t.Fatal("the borrower's token reached Ollama")
	}
	fwd := e.gate("ollama-forward").tap
	if !strings.Contains(string(fwd.Sent()), "Bearer "+e.token) {
		t.Fatal("control: the forwarding gate's tap does not show the token it forwarded; the check above would be blind")
	}
	// assertTokenKept (at cleanup) checks both logs.
}
