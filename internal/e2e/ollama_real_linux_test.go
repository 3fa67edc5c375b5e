//go:build linux

package e2e

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

// The real-upstream tests put the real vacancyd binary in front of a real
// Ollama server (internal/testutil/realollama: Ollama v0.6.5 built from its
// Go module) that runs real inference on the project's generated tiny llama
// model (internal/testutil/gguf), and drive it with the official Ollama and
// OpenAI Go clients. Between each gate and Ollama sits a tap, a transparent
// TCP relay that records every byte, because Ollama does not log request
// headers: it shows what the gate sent upstream, and when the gate hung up
// on an answer that was still coming.
//
// Every assertion is about what happened (a chunk arrived while Ollama's
// answer was unfinished, a request never reached Ollama, /api/ps is empty),
// never about how long it took; waits are bounded by patience only.

// Streaming through the gate, with both official clients: whole streams
// arrive token by token, and each client's first token arrives while
// Ollama is still generating the answer (the tap shows it unfinished), so a
// gate that buffered would fail here. Model discovery passes too.
func TestRealOllamaStreamsThroughTheGate(t *testing.T) {
	e := roStart(t, roSetup{})
	e.waitLendable(t)
	g := e.gate("ollama")
	c := e.ollamaClient("ollama")

	t.Run("generate", func(t *testing.T) {
		var chunks []ollama.GenerateResponse
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "once upon a time",
			Options: map[string]any{"num_predict": 16, "seed": 7}},
			func(r ollama.GenerateResponse) error { chunks = append(chunks, r); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) != 17 {
			t.Fatalf("%d chunks: want 16 tokens one by one, then done", len(chunks))
		}
		last := chunks[16]
		if !last.Done || last.DoneReason != "length" || last.EvalCount != 16 {
			t.Fatalf("%d chunks, last %+v: want 16 tokens one by one, then done", len(chunks), last)
		}
		for _, ch := range chunks[:16] {
			if ch.Done || ch.Response == "" {
				t.Fatalf("chunk %+v: want one token each", ch)
			}
		}

		const marker = "generate stream proof"
		n := 0
		err = c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: marker, Options: map[string]any{"num_predict": -1}},
			func(r ollama.GenerateResponse) error {
				if r.Response == "" {
					return nil
				}
				n++
				roAssertUnfinished(t, g.tap, marker)
				return errRoStop
			})
		if !errors.Is(err, errRoStop) || n != 1 {
			t.Fatalf("generate ended with %v after %d tokens, want the test to stop it at its first; %s", err, n, roProgress(g.tap, marker))
		}
		e.assertCutByGate(t, g.tap, marker, "/api/generate", `"done":true`)
	})

	t.Run("chat", func(t *testing.T) {
		var text strings.Builder
		var last ollama.ChatResponse
		chunks := 0
		err := c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel,
			Messages: []ollama.Message{{Role: "user", Content: "hello there"}},
			Options:  map[string]any{"num_predict": 12, "seed": 7}},
			func(r ollama.ChatResponse) error {
				chunks++
				text.WriteString(r.Message.Content)
				last = r
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if chunks != 13 || !last.Done || last.EvalCount != 12 || last.Message.Role != "assistant" || text.Len() == 0 {
			t.Fatalf("%d chunks, text %q, last %+v", chunks, text.String(), last)
		}

		const marker = "chat stream proof"
		n := 0
		err = c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel,
			Messages: []ollama.Message{{Role: "user", Content: marker}},
			Options:  map[string]any{"num_predict": -1}},
			func(r ollama.ChatResponse) error {
				if r.Message.Content == "" {
					return nil
				}
				n++
				roAssertUnfinished(t, g.tap, marker)
				return errRoStop
			})
		if !errors.Is(err, errRoStop) || n != 1 {
			t.Fatalf("chat ended with %v after %d tokens; %s", err, n, roProgress(g.tap, marker))
		}
		e.assertCutByGate(t, g.tap, marker, "/api/chat", `"done":true`)
	})

	t.Run("openai chat completions", func(t *testing.T) {
		oc := e.openaiClient("ollama")
		stream := oc.Chat.Completions.NewStreaming(roCtx(t), openai.ChatCompletionNewParams{
			Model:     roModel,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")},
			MaxTokens: openai.Int(10),
			Seed:      openai.Int(7),
		})
		var text strings.Builder
		chunks, finish := 0, ""
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				if ch.Delta.Content != "" {
					chunks++
				}
				text.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if chunks != 10 || finish != "length" {
			t.Fatalf("%d content chunks (%q), finish %q: want 10 tokens one by one, then length", chunks, text.String(), finish)
		}

		const marker = "openai stream proof"
		stream = oc.Chat.Completions.NewStreaming(roCtx(t), openai.ChatCompletionNewParams{
			Model:    roModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(marker)},
		})
		got := false
		for !got && stream.Next() {
			for _, ch := range stream.Current().Choices {
				got = got || ch.Delta.Content != ""
			}
		}
		if !got {
			t.Fatalf("the stream ended before a token: %v; %s", stream.Err(), roProgress(g.tap, marker))
		}
		roAssertUnfinished(t, g.tap, marker)
		stream.Close()
		e.assertCutByGate(t, g.tap, marker, "/v1/chat/completions", "[DONE]")
	})

	t.Run("list and show", func(t *testing.T) {
		list, err := c.List(roCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Models) != 1 || list.Models[0].Name != roModel+":latest" || list.Models[0].Details.Family != "llama" || list.Models[0].Details.Format != "gguf" {
			t.Fatalf("List through the gate = %+v", list.Models)
		}
		show, err := c.Show(roCtx(t), &ollama.ShowRequest{Model: roModel})
		if err != nil {
			t.Fatal(err)
		}
		if show.Details.Family != "llama" || show.ModelInfo["general.architecture"] != "llama" ||
			show.ModelInfo["llama.embedding_length"] != float64(64) || show.ModelInfo["llama.block_count"] != float64(2) {
			t.Fatalf("Show through the gate = details %+v, model_info %v", show.Details, show.ModelInfo)
		}
		oc := e.openaiClient("ollama")
		page, err := oc.Models.List(roCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != roModel+":latest" {
			t.Fatalf("/v1/models through the gate = %+v", page.Data)
		}
	})

	// Nothing is left running at the gate.
	if w := e.status(t).State.Work; len(w) != 0 {
		t.Fatalf("/status still lists work: %+v", w)
	}
}

// Management: a gate with management denied refuses pull, create (and blob
// upload), delete, copy and ps before anything reaches Ollama; a gate with
// management = "allow" hands each of them to Ollama, which acts on them.
func TestRealOllamaManagementRefusedOrAllowed(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{
		{id: "ollama", management: "deny"},
		{id: "ollama-admin", management: "allow"},
	}})
	digest := "sha256:" + strings.Repeat("ab", 32)
	ops := []struct {
		name, method, path string
		call               func(ctx context.Context, c *ollama.Client) error
	}{
		{"pull", "POST", "/api/pull", func(ctx context.Context, c *ollama.Client) error {
			// An address that refuses at once: Ollama must try and fail.
			return c.Pull(ctx, &ollama.PullRequest{Model: "127.0.0.1:1/library/nothing:latest", Insecure: true}, func(ollama.ProgressResponse) error { return nil })
		}},
		{"blob upload", "POST", "/api/blobs/" + digest, func(ctx context.Context, c *ollama.Client) error {
			return c.CreateBlob(ctx, digest, strings.NewReader("not the right bytes"))
		}},
		{"create", "POST", "/api/create", func(ctx context.Context, c *ollama.Client) error {
			return c.Create(ctx, &ollama.CreateRequest{Model: "tiny-made", From: roModel}, func(ollama.ProgressResponse) error { return nil })
		}},
		{"copy", "POST", "/api/copy", func(ctx context.Context, c *ollama.Client) error {
			return c.Copy(ctx, &ollama.CopyRequest{Source: roModel, Destination: "tiny-copy"})
		}},
		{"ps", "GET", "/api/ps", func(ctx context.Context, c *ollama.Client) error {
			_, err := c.ListRunning(ctx)
			return err
		}},
		{"delete", "DELETE", "/api/delete", func(ctx context.Context, c *ollama.Client) error {
			return c.Delete(ctx, &ollama.DeleteRequest{Model: "tiny-copy"})
		}},
	}

	deny := e.ollamaClient("ollama")
	mark := e.ollama.Log.Mark()
	before := e.requests(t, "ollama", "refused_management")
	for _, op := range ops {
		err := op.call(roCtx(t), deny)
		var se ollama.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusForbidden {
			t.Errorf("%s through a deny gate: %T %v, want a 403 api.StatusError", op.name, err, err)
		}
	}
	if got := e.requests(t, "ollama", "refused_management") - before; got != float64(len(ops)) {
		t.Errorf("refused_management moved by %v, want %d", got, len(ops))
	}
	if n := len(e.gate("ollama").tap.Conns()); n != 0 {
		t.Errorf("the deny gate opened %d connections to Ollama", n)
	}
	if rs := realollama.Requests(e.ollama.Log.Since(mark)); len(rs) != 0 {
		t.Errorf("Ollama logged requests while the deny gate refused management: %+v", rs)
	}

	allow := e.ollamaClient("ollama-admin")
	for _, op := range ops {
		mark := e.ollama.Log.Mark()
		err := op.call(roCtx(t), allow)
		switch op.name {
		case "pull":
			// Ollama's own error, not the gate's refusal.
			var se ollama.StatusError
			if err == nil || (errors.As(err, &se) && se.StatusCode == http.StatusForbidden) || !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("pull through the allow gate: %v, want Ollama's failure to reach 127.0.0.1:1", err)
			}
		case "blob upload":
			// Ollama checks the digest of what it receives.
			var se ollama.StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || !strings.Contains(se.ErrorMessage, "digest") {
				t.Errorf("blob upload through the allow gate: %T %v, want Ollama's digest mismatch", err, err)
			}
		default:
			if err != nil {
				t.Errorf("%s through the allow gate: %v", op.name, err)
			}
		}
		roWait(t, "Ollama to log "+op.method+" "+op.path, func() bool {
			return realollama.Count(realollama.Requests(e.ollama.Log.Since(mark)), op.method, op.path) == 1
		})
	}
	// Ollama acted: the created model exists, the copy came and went.
	list, err := e.ollama.Client().List(roCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"tiny-made:latest", "tiny:latest"}) {
		t.Fatalf("Ollama's models after management through the allow gate: %v", names)
	}
}

// A borrower's keep_alive is capped: asked for 24h through a gate with
// max_keep_alive = "1m", Ollama's own /api/ps expiry is a minute away; the
// same request sent directly keeps the model for a day.
func TestRealOllamaKeepAliveCapped(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{{id: "ollama", management: "deny", maxKeepAlive: "1m"}}})
	e.waitLendable(t)
	generate := func(c *ollama.Client) {
		t.Helper()
		stream := false
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "keep me", Stream: &stream,
			KeepAlive: &ollama.Duration{Duration: 24 * time.Hour}, Options: map[string]any{"num_predict": 2}},
			func(ollama.GenerateResponse) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	// expiry waits until Ollama's scheduler has set the model's idle timer
	// (its debug line), then reads /api/ps directly.
	expiry := func(mark realollama.Mark) (time.Time, time.Time) {
		t.Helper()
		roWait(t, "Ollama's idle timer", func() bool { return strings.Contains(e.ollama.Log.Since(mark), "has gone idle") })
		ps := e.ollama.Loaded(t)
		read := time.Now()
		if len(ps) != 1 || ps[0].Name != roModel+":latest" {
			t.Fatalf("/api/ps = %+v", ps)
		}
		return ps[0].ExpiresAt, read
	}

	start := time.Now()
	mark := e.ollama.Log.Mark()
	generate(e.ollamaClient("ollama"))
	exp, read := expiry(mark)
	if exp.Before(start.Add(time.Minute)) || exp.After(read.Add(time.Minute)) {
		t.Fatalf("after a borrower asked for 24h: Ollama expires the model at %s, want a minute after the request (%s .. %s)",
			exp.Format(time.RFC3339Nano), start.Add(time.Minute).Format(time.RFC3339Nano), read.Add(time.Minute).Format(time.RFC3339Nano))
	}
	ex, ok := roExchange(e.gate("ollama").tap, "keep me")
	if !ok || !strings.Contains(string(ex.Body), `"keep_alive":"1m0s"`) {
		t.Fatalf("the gate sent Ollama %s", ex.Body)
	}

	mark = e.ollama.Log.Mark()
	generate(e.ollama.Client())
	exp, _ = expiry(mark)
	if exp.Before(time.Now().Add(23 * time.Hour)) {
		t.Fatalf("asked directly for 24h, Ollama expires the model at %s", exp)
	}
}
