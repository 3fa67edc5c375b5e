package fakeupstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func openaiClient(baseURL, key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(baseURL+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	)
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something")},
	}
}

func TestOpenAIChatStreamWithOfficialClient(t *testing.T) {
	s := StartOpenAI(t, WithBearer("sk-test"), WithTokens(4))
	client := openaiClient(s.URL, "sk-test")

	stream := client.Chat.Completions.NewStreaming(waitCtx(t), chatParams("my-model"))
	var chunks []openai.ChatCompletionChunk
	var text strings.Builder
	for stream.Next() {
		c := stream.Current()
		chunks = append(chunks, c)
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// A role chunk, one chunk a token, the finish chunk.
	if len(chunks) != 6 {
		t.Fatalf("chunks %d", len(chunks))
	}
	if text.String() != Text(4) {
		t.Fatalf("text %q", text.String())
	}
	first, last := chunks[0], chunks[len(chunks)-1]
	if first.Choices[0].Delta.Role != "assistant" || first.Object != "chat.completion.chunk" || first.Model != "my-model" {
		t.Fatalf("first chunk %s", first.RawJSON())
	}
	if last.Choices[0].FinishReason != "stop" || !strings.Contains(last.RawJSON(), `"timings"`) {
		t.Fatalf("last chunk %s", last.RawJSON())
	}
	for _, c := range chunks {
		if c.ID != first.ID {
			t.Fatalf("ids differ: %q %q", c.ID, first.ID)
		}
	}

	reqs := s.RequestsTo("/v1/chat/completions")
	if len(reqs) != 1 {
		t.Fatalf("requests %d", len(reqs))
	}
	r := reqs[0]
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := r.JSON(&body); err != nil {
		t.Fatal(err)
	}
	if r.Method != "POST" || r.Header.Get("Authorization") != "Bearer sk-test" || !body.Stream || body.Model != "my-model" || r.Status != 200 {
		t.Fatalf("recorded %+v body %s", r, r.Body)
	}
}

func TestOpenAIUsageAndLimits(t *testing.T) {
	s := StartOpenAI(t, WithTokens(5))
	client := openaiClient(s.URL, "")

	p := chatParams("m")
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := client.Chat.Completions.NewStreaming(waitCtx(t), p)
	var last openai.ChatCompletionChunk
	n := 0
	for stream.Next() {
		last = stream.Current()
		n++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 8 || len(last.Choices) != 0 || last.Usage.CompletionTokens != 5 {
		t.Fatalf("chunks %d last %s", n, last.RawJSON())
	}

	p = chatParams("m")
	p.MaxTokens = openai.Int(2)
	resp, err := client.Chat.Completions.New(waitCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "chat.completion" || resp.Choices[0].Message.Content != Text(2) ||
		resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 2 {
		t.Fatalf("completion %s", resp.RawJSON())
	}

	cs := client.Completions.NewStreaming(waitCtx(t), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel("m"),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
	})
	var ctext strings.Builder
	for cs.Next() {
		if c := cs.Current(); len(c.Choices) > 0 {
			ctext.WriteString(c.Choices[0].Text)
		}
	}
	if err := cs.Err(); err != nil || ctext.String() != Text(5) {
		t.Fatalf("completions %q %v", ctext.String(), err)
	}

	emb, err := client.Embeddings.New(waitCtx(t), openai.EmbeddingNewParams{
		Model: openai.EmbeddingModel("m"),
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || len(emb.Data[1].Embedding) != ollamaEmbedDim {
		t.Fatalf("embeddings %s", emb.RawJSON())
	}
}

func TestOpenAIModelsAndErrors(t *testing.T) {
	s := StartOpenAI(t, WithBearer("k"), WithModels("qwen2.5-7b"))
	good := openaiClient(s.URL, "k")
	page, err := good.Models.List(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "qwen2.5-7b" || page.Data[0].OwnedBy != "llamacpp" {
		t.Fatalf("models %s", page.RawJSON())
	}

	bad := openaiClient(s.URL, "bad")
	_, err = bad.Chat.Completions.New(waitCtx(t), chatParams("m"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type != "authentication_error" ||
		apiErr.Message != "Invalid API Key" {
		t.Fatalf("bad key: %v", err)
	}

	res := do(t, "POST", s.URL+"/v1/chat/completions", `{"model":"m"}`, "Authorization", "Bearer k")
	if res.status != 400 || !strings.Contains(string(res.body), `"type":"invalid_request_error"`) ||
		!strings.Contains(string(res.body), `'messages' is required`) {
		t.Fatalf("no messages: %d %s", res.status, res.body)
	}
	res = do(t, "POST", s.URL+"/v1/chat/completions", `{not json`, "Authorization", "Bearer k")
	if res.status != 500 || !strings.Contains(string(res.body), `"type":"server_error"`) {
		t.Fatalf("bad json: %d %s", res.status, res.body)
	}
}

func TestOpenAICancelMidStream(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	s := StartOpenAI(t, WithRelease(hold), WithTokens(10))
	client := openaiClient(s.URL, "")

	ctx, cancel := context.WithCancel(waitCtx(t))
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("m"))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	if got := s.BusySlots(); len(got) != 1 {
		t.Fatalf("busy slots %v", got)
	}
	cancel()
	for stream.Next() {
	}
	_ = stream.Close()

	if err := s.WaitCancelled(waitCtx(t), 1); err != nil {
		t.Fatalf("fake never saw the cancel: %v", err)
	}
	select {
	case r := <-s.Cancellations():
		if r.Path != "/v1/chat/completions" || !r.Cancelled {
			t.Fatalf("cancellation %+v", r)
		}
	case <-waitCtx(t).Done():
		t.Fatal("no cancellation delivered")
	}
	if err := s.WaitIdle(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := s.BusySlots(); len(got) != 0 {
		t.Fatalf("slot not freed: %v", got)
	}
	if r, _ := s.Last(); !r.Cancelled || !r.Done {
		t.Fatalf("last %+v", r)
	}
}

func TestLlamaCppNativeRoutes(t *testing.T) {
	s := StartOpenAI(t, WithTokens(3))

	res := do(t, "POST", s.URL+"/completion", map[string]any{"prompt": "Hello", "stream": true})
	ev := sseEvents(t, res.body)
	if res.header.Get("Content-Type") != "text/event-stream" || len(ev) != 4 {
		t.Fatalf("native stream %d events: %s", len(ev), res.body)
	}
	final := decode[map[string]any](t, []byte(ev[3]))
	if final["stop"] != true || final["stop_type"] != "eos" || strings.Contains(string(res.body), "[DONE]") {
		t.Fatalf("native final %v", final)
	}
	res = do(t, "POST", s.URL+"/completion", map[string]any{"prompt": "Hello", "n_predict": 2})
	if got := decode[map[string]any](t, res.body); got["content"] != Text(2) || got["stop_type"] != "limit" {
		t.Fatalf("native non-stream %v", got)
	}

	res = do(t, "POST", s.URL+"/v1/completions", map[string]any{"prompt": "Hello", "stream": true})
	ev = sseEvents(t, res.body)
	if ev[len(ev)-1] != "[DONE]" || len(ev) != 5 {
		t.Fatalf("oai completions: %s", res.body)
	}

	tok := decode[struct{ Tokens []int }](t, do(t, "POST", s.URL+"/tokenize", map[string]any{"content": "hello big world"}).body)
	if len(tok.Tokens) != 3 {
		t.Fatalf("tokens %v", tok.Tokens)
	}
	detok := decode[struct{ Content string }](t, do(t, "POST", s.URL+"/detokenize", map[string]any{"tokens": tok.Tokens}).body)
	if detok.Content != "hello big world" {
		t.Fatalf("detokenize %q", detok.Content)
	}

	health := do(t, "GET", s.URL+"/health", nil)
	if health.status != 200 || string(health.body) != `{"status":"ok"}` || health.header.Get("Server") != "llama.cpp" {
		t.Fatalf("health %d %s", health.status, health.body)
	}
	if got := decode[map[string]any](t, do(t, "GET", s.URL+"/props", nil).body); got["total_slots"] != float64(4) {
		t.Fatalf("props %v", got)
	}
	if got := decode[[]map[string]any](t, do(t, "GET", s.URL+"/slots", nil).body); len(got) != 4 || got[0]["is_processing"] != false {
		t.Fatalf("slots %v", got)
	}
	models := decode[map[string]any](t, do(t, "GET", s.URL+"/models", nil).body)
	if models["object"] != "list" || len(models["data"].([]any)) != 1 || len(models["models"].([]any)) != 1 {
		t.Fatalf("models %v", models)
	}
	metrics := do(t, "GET", s.URL+"/metrics", nil)
	for _, want := range []string{"# TYPE llamacpp:prompt_tokens_total counter", "llamacpp:tokens_predicted_total 8", "llamacpp:requests_processing 0"} {
		if !strings.Contains(string(metrics.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics.body)
		}
	}
	if head := do(t, "HEAD", s.URL+"/health", nil); head.status != 200 {
		t.Fatalf("HEAD /health %d", head.status)
	}
}

func TestOllamaOpenAICompatWithOfficialClient(t *testing.T) {
	s := StartOllama(t, WithTokens(3))
	client := openaiClient(s.URL, "ollama")

	stream := client.Chat.Completions.NewStreaming(waitCtx(t), chatParams("llama3.2"))
	var chunks []openai.ChatCompletionChunk
	var text strings.Builder
	for stream.Next() {
		c := stream.Current()
		chunks = append(chunks, c)
		text.WriteString(c.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 4 || text.String() != Text(3) || chunks[3].Choices[0].FinishReason != "stop" ||
		!strings.Contains(chunks[0].RawJSON(), `"system_fingerprint":"fp_ollama"`) || !strings.HasPrefix(chunks[0].ID, "chatcmpl-") {
		t.Fatalf("%d chunks, text %q, last %s", len(chunks), text.String(), chunks[len(chunks)-1].RawJSON())
	}

	page, err := client.Models.List(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.OwnedBy != "library" || m.Object != "model" {
			t.Fatalf("model %s", m.RawJSON())
		}
	}
	if strings.Join(ids, ",") != "llama3.2:latest,nomic-embed-text:latest" {
		t.Fatalf("ids %v", ids)
	}

	m, err := client.Models.Get(waitCtx(t), "llama3.2")
	if err != nil || m.ID != "llama3.2" {
		t.Fatalf("get model %v %v", m, err)
	}

	_, err = client.Chat.Completions.New(waitCtx(t), chatParams("nope"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Message != "model 'nope' not found" {
		t.Fatalf("unknown model: %v", err)
	}

	emb, err := client.Embeddings.New(waitCtx(t), openai.EmbeddingNewParams{
		Model: openai.EmbeddingModel("nomic-embed-text"),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil || len(emb.Data) != 1 || len(emb.Data[0].Embedding) != ollamaEmbedDim {
		t.Fatalf("embeddings %v %v", emb, err)
	}

	res := do(t, "POST", s.URL+"/v1/chat/completions", map[string]any{"model": "llama3.2", "messages": []any{}})
	if res.status != 400 || string(res.body) != `{"error":{"message":"[] is too short - 'messages'","type":"invalid_request_error","param":null,"code":null}}` {
		t.Fatalf("empty messages: %d %s", res.status, res.body)
	}
}
