package fakeupstream

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

func ollamaClient(t *testing.T, s *Ollama, hc *http.Client) *api.Client {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return api.NewClient(u, hc)
}

func userChat(model string) *api.ChatRequest {
	return &api.ChatRequest{Model: model, Messages: []api.Message{{Role: "user", Content: "Say something"}}}
}

func TestOllamaChatStreamWithOfficialClient(t *testing.T) {
	s := StartOllama(t, WithTokens(4))
	c := ollamaClient(t, s, nil)

	var got []api.ChatResponse
	err := c.Chat(waitCtx(t), userChat("llama3.2"), func(r api.ChatResponse) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("responses %d", len(got))
	}
	var text strings.Builder
	for _, r := range got[:4] {
		if r.Done || r.Message.Role != "assistant" || r.Model != "llama3.2" || r.CreatedAt.IsZero() {
			t.Fatalf("chunk %+v", r)
		}
		text.WriteString(r.Message.Content)
	}
	if text.String() != Text(4) {
		t.Fatalf("text %q", text.String())
	}
	last := got[4]
	if !last.Done || last.DoneReason != "stop" || last.EvalCount != 4 || last.PromptEvalCount == 0 || last.TotalDuration == 0 {
		t.Fatalf("final %+v", last)
	}

	r, _ := s.Last()
	var body map[string]any
	if err := r.JSON(&body); err != nil {
		t.Fatal(err)
	}
	if r.Path != "/api/chat" || r.Method != "POST" || r.Header.Get("Accept") != "application/x-ndjson" ||
		!strings.HasPrefix(r.Header.Get("User-Agent"), "ollama/") || body["model"] != "llama3.2" {
		t.Fatalf("recorded %+v %s", r, r.Body)
	}
	// The raw stream is NDJSON, as the client expects.
	res := do(t, "POST", s.URL+"/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"x"}]}`)
	if res.header.Get("Content-Type") != "application/x-ndjson" || strings.Count(string(res.body), "\n") != 5 {
		t.Fatalf("raw stream %q %s", res.header.Get("Content-Type"), res.body)
	}
}

func TestOllamaGenerateListShowWithOfficialClient(t *testing.T) {
	s := StartOllama(t, WithTokens(3), WithModels("llama3.2", "qwen2.5:7b", "nomic-embed-text"))
	c := ollamaClient(t, s, nil)
	ctx := waitCtx(t)

	stream := false
	var got []api.GenerateResponse
	err := c.Generate(ctx, &api.GenerateRequest{Model: "qwen2.5:7b", Prompt: "Why?", Stream: &stream},
		func(r api.GenerateResponse) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Response != Text(3) || !got[0].Done || got[0].DoneReason != "stop" || len(got[0].Context) == 0 {
		t.Fatalf("generate %+v", got)
	}
	got = nil
	err = c.Generate(ctx, &api.GenerateRequest{Model: "qwen2.5:7b", Prompt: "Why?", Options: map[string]any{"num_predict": 2}},
		func(r api.GenerateResponse) error { got = append(got, r); return nil })
	if err != nil || len(got) != 3 || got[2].DoneReason != "length" {
		t.Fatalf("generate num_predict %+v %v", got, err)
	}

	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
		if m.Model != m.Name || m.Size == 0 || len(m.Digest) != 64 || m.Details.Format != "gguf" {
			t.Fatalf("model %+v", m)
		}
	}
	if strings.Join(names, ",") != "llama3.2:latest,qwen2.5:7b,nomic-embed-text:latest" {
		t.Fatalf("names %v", names)
	}

	show, err := c.Show(ctx, &api.ShowRequest{Model: "llama3.2"})
	if err != nil {
		t.Fatal(err)
	}
	if show.Details.Family != "llama" || show.Template == "" || len(show.Capabilities) != 1 || show.Capabilities[0] != "completion" {
		t.Fatalf("show %+v", show)
	}

	_, err = c.Show(ctx, &api.ShowRequest{Model: "nope"})
	var serr api.StatusError
	if !errors.As(err, &serr) || serr.StatusCode != 404 || serr.ErrorMessage != "model 'nope' not found" {
		t.Fatalf("show unknown: %v", err)
	}
	err = c.Chat(ctx, userChat("nope"), func(api.ChatResponse) error { return nil })
	if !errors.As(err, &serr) || serr.StatusCode != 404 {
		t.Fatalf("chat unknown: %v", err)
	}
	err = c.Generate(ctx, &api.GenerateRequest{Model: "nomic-embed-text", Prompt: "x"}, func(api.GenerateResponse) error { return nil })
	if !errors.As(err, &serr) || serr.StatusCode != 400 || serr.ErrorMessage != `"nomic-embed-text" does not support generate` {
		t.Fatalf("generate on embedding model: %v", err)
	}

	v, err := c.Version(ctx)
	if err != nil || v != "0.17.4" {
		t.Fatalf("version %q %v", v, err)
	}
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	emb, err := c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: []string{"a", "b"}})
	if err != nil || len(emb.Embeddings) != 2 || len(emb.Embeddings[0]) != ollamaEmbedDim {
		t.Fatalf("embed %+v %v", emb, err)
	}
	old, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "nomic-embed-text", Prompt: "a"})
	if err != nil || len(old.Embedding) != ollamaEmbedDim {
		t.Fatalf("embeddings %+v %v", old, err)
	}
}

func TestOllamaKeepAliveAndUnload(t *testing.T) {
	s := StartOllama(t, WithTokens(2), WithDefaultKeepAlive(10*time.Minute))
	c := ollamaClient(t, s, nil)
	ctx := waitCtx(t)
	noop := func(api.GenerateResponse) error { return nil }

	// No keep_alive: the default applies.
	before := time.Now()
	if err := c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: "hi"}, noop); err != nil {
		t.Fatal(err)
	}
	ps, err := c.ListRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Models) != 1 || ps.Models[0].Name != "llama3.2:latest" || ps.Models[0].SizeVRAM == 0 ||
		ps.Models[0].ExpiresAt.Before(before.Add(10*time.Minute)) || ps.Models[0].ExpiresAt.After(time.Now().Add(10*time.Minute)) {
		t.Fatalf("ps %+v", ps.Models)
	}
	if l := s.Loaded(); len(l) != 1 || l[0].KeepAlive != 10*time.Minute || l[0].Forever || l[0].Busy != 0 {
		t.Fatalf("loaded %+v", l)
	}

	// A keep_alive the request sets (a string, or a number of seconds).
	ka := &api.Duration{Duration: time.Hour}
	if err := c.Chat(ctx, &api.ChatRequest{Model: "llama3.2", Messages: userChat("").Messages, KeepAlive: ka},
		func(api.ChatResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if l := s.Loaded(); l[0].KeepAlive != time.Hour {
		t.Fatalf("loaded %+v", l)
	}
	res := do(t, "POST", s.URL+"/api/generate", `{"model":"llama3.2","prompt":"x","keep_alive":90,"stream":false}`)
	if res.status != 200 || s.Loaded()[0].KeepAlive != 90*time.Second {
		t.Fatalf("numeric keep_alive: %d %+v", res.status, s.Loaded())
	}

	// Negative is forever.
	res = do(t, "POST", s.URL+"/api/generate", `{"model":"llama3.2","keep_alive":-1}`)
	if got := decode[api.GenerateResponse](t, res.body); got.DoneReason != "load" || !got.Done {
		t.Fatalf("load %s", res.body)
	}
	ps, _ = c.ListRunning(ctx)
	if !s.Loaded()[0].Forever || ps.Models[0].ExpiresAt.Year() < 2200 {
		t.Fatalf("forever %+v", ps.Models)
	}

	// An empty prompt with keep_alive 0 unloads at once.
	zero := &api.Duration{}
	var resp []api.GenerateResponse
	err = c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", KeepAlive: zero},
		func(r api.GenerateResponse) error { resp = append(resp, r); return nil })
	if err != nil || len(resp) != 1 || resp[0].DoneReason != "unload" {
		t.Fatalf("unload %+v %v", resp, err)
	}
	if ps, _ := c.ListRunning(ctx); len(ps.Models) != 0 {
		t.Fatalf("still loaded %+v", ps.Models)
	}

	// A real request with keep_alive 0 unloads when it ends.
	if err := c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: "x", KeepAlive: zero}, noop); err != nil {
		t.Fatal(err)
	}
	if l := s.Loaded(); len(l) != 0 {
		t.Fatalf("loaded after keep_alive 0: %+v", l)
	}
	// Chat unload: no messages, keep_alive 0.
	res = do(t, "POST", s.URL+"/api/chat", `{"model":"llama3.2","keep_alive":0}`)
	if got := decode[api.ChatResponse](t, res.body); got.DoneReason != "unload" || got.Message.Role != "assistant" {
		t.Fatalf("chat unload %s", res.body)
	}
	res = do(t, "POST", s.URL+"/api/generate", `{"model":"llama3.2","keep_alive":true}`)
	if res.status != 400 || string(res.body) != `{"error":"Unsupported type: 'bool'"}` {
		t.Fatalf("bad keep_alive: %d %s", res.status, res.body)
	}
}

func TestOllamaCancelMidStream(t *testing.T) {
	s := StartOllama(t, WithTokens(20))
	release := s.Hold()
	t.Cleanup(release)
	c := ollamaClient(t, s, nil)

	ctx, cancel := context.WithCancel(waitCtx(t))
	n := 0
	err := c.Chat(ctx, userChat("llama3.2"), func(r api.ChatResponse) error {
		n++
		if len(s.Loaded()) != 1 || s.Loaded()[0].Busy != 1 {
			t.Errorf("model not busy while streaming: %+v", s.Loaded())
		}
		cancel()
		return nil
	})
	// The client ends quietly when its context ends between lines (its
	// scanner stops without an error), or with context.Canceled.
	if (err != nil && !errors.Is(err, context.Canceled)) || n != 1 {
		t.Fatalf("chat: %d responses, %v", n, err)
	}
	if err := s.WaitCancelled(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	r := <-s.Cancellations()
	if r.Path != "/api/chat" {
		t.Fatalf("cancelled %+v", r)
	}
	if err := s.WaitIdle(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if l := s.Loaded(); len(l) != 1 || l[0].Busy != 0 {
		t.Fatalf("after cancel %+v", l)
	}
}

func TestOllamaManagementWithOfficialClient(t *testing.T) {
	s := StartOllama(t)
	c := ollamaClient(t, s, nil)
	ctx := waitCtx(t)

	var statuses []string
	if err := c.Pull(ctx, &api.PullRequest{Model: "mistral"}, func(p api.ProgressResponse) error {
		statuses = append(statuses, p.Status)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if statuses[0] != "pulling manifest" || statuses[len(statuses)-1] != "success" {
		t.Fatalf("pull %v", statuses)
	}
	if err := c.Copy(ctx, &api.CopyRequest{Source: "mistral", Destination: "mine"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &api.CreateRequest{Model: "custom", From: "llama3.2"}, func(api.ProgressResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &api.DeleteRequest{Model: "llama3.2"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Models(), ","); got != "custom:latest,mine:latest,mistral:latest,nomic-embed-text:latest" {
		t.Fatalf("models %s", got)
	}
	var serr api.StatusError
	if err := c.Delete(ctx, &api.DeleteRequest{Model: "llama3.2"}); !errors.As(err, &serr) || serr.StatusCode != 404 {
		t.Fatalf("delete twice: %v", err)
	}
	if err := c.Push(ctx, &api.PushRequest{Model: "mine"}, func(api.ProgressResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if res := do(t, "HEAD", s.URL+"/", nil); res.status != 200 {
		t.Fatalf("HEAD / %d", res.status)
	}
	if res := do(t, "GET", s.URL+"/", nil); string(res.body) != "Ollama is running" {
		t.Fatalf("GET / %q", res.body)
	}
	if res := do(t, "GET", s.URL+"/api/generate", nil); res.status != 405 || string(res.body) != "405 method not allowed" {
		t.Fatalf("GET /api/generate %d %q", res.status, res.body)
	}
}

// bearerTransport adds a bearer token, as a client behind an authenticating
// proxy would.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestOllamaCredential(t *testing.T) {
	s := StartOllama(t, WithBearer("tok"))
	_, err := ollamaClient(t, s, nil).List(waitCtx(t))
	var aerr api.AuthorizationError
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 {
		t.Fatalf("no token: %v", err)
	}
	list, err := ollamaClient(t, s, &http.Client{Transport: bearerTransport{"tok"}}).List(waitCtx(t))
	if err != nil || len(list.Models) != 2 {
		t.Fatalf("with token: %+v %v", list, err)
	}
}
