package gate_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

func openaiClient(e *gateEnv, token string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(e.URL+"/v1/"),
		option.WithAPIKey(token),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{Proxy: nil}}),
	)
}

func ollamaClient(t testing.TB, e *gateEnv, token string) *ollama.Client {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	return ollama.NewClient(u, borrowerClient(token))
}

// TestOpenAIClientStreamsThroughGate: the official OpenAI Go SDK streams a
// chat completion through a gate in front of llama.cpp, and receives the
// first chunks while the upstream is still holding the rest of the
// stream, so the gate does not buffer. It then lists the models.
func TestOpenAIClientStreamsThroughGate(t *testing.T) {
	fake := fakeupstream.StartOpenAI(t, fakeupstream.WithTokens(5))
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL})
	client := openaiClient(e, aliceToken)
	ctx := waitCtx(t)

	release := fake.Hold()
	defer release()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    fake.Model(),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something")},
	})
	defer stream.Close()
	var text strings.Builder
	// llama.cpp sends the role first, then the first token; the fake then
	// holds the stream until released.
	for text.Len() == 0 {
		if !stream.Next() {
			t.Fatalf("stream ended before the first token: %v", stream.Err())
		}
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if text.String() != fakeupstream.Token(0) {
		t.Fatalf("first token %q", text.String())
	}
	// The upstream has not finished: the first chunk came through while
	// the rest is held.
	if fake.InFlight() != 1 {
		t.Fatalf("upstream in flight %d while its stream is held", fake.InFlight())
	}
	if e.inFlight(t) != 1 {
		t.Fatalf("gate in-flight gauge %v during a stream", e.inFlight(t))
	}
	release()
	var finish string
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != fakeupstream.Text(5) || finish != "stop" {
		t.Fatalf("streamed %q finish %q", text.String(), finish)
	}

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) == 0 || page.Data[0].ID != fake.Model() {
		t.Fatalf("models %+v", page.Data)
	}
	for _, r := range fake.Requests() {
		if strings.Contains(r.Header.Get("Authorization"), aliceToken) {
			t.Fatalf("the borrower's token reached the upstream on %s", r.Path)
		}
	}
	// The SDK closes the stream as soon as it reads [DONE], which may be
	// before the gate has read the end of the upstream's response: that
	// request then counts as client_gone. Either way it is not an error.
	eventually(t, "both requests counted", func() bool {
		return e.counter(t, gate.OutcomeAdmitted)+e.counter(t, gate.OutcomeClientGone) == 2
	})
	if e.counter(t, gate.OutcomeAdmitted) < 1 || e.counter(t, gate.OutcomeUpstreamError) != 0 {
		t.Fatalf("admitted %v, upstream_error %v", e.counter(t, gate.OutcomeAdmitted), e.counter(t, gate.OutcomeUpstreamError))
	}
	eventually(t, "in-flight gauge back to 0", func() bool { return e.inFlight(t) == 0 })
}

// TestOpenAIClientSeesNotLending: while lending is paused the SDK gets a
// 503 whose error it parses (type and code lending_paused), and the
// upstream sees nothing; model listing still works.
func TestOpenAIClientSeesNotLending(t *testing.T) {
	fake := fakeupstream.StartOpenAI(t)
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL})
	client := openaiClient(e, aliceToken)
	ctx := waitCtx(t)
	e.Switches.Pause(lending.Pauser{Via: "test"})

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    fake.Model(),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %T %v, want *openai.Error", err, err)
	}
	if apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Type != "lending_paused" || apiErr.Code != "lending_paused" ||
		!strings.Contains(apiErr.Message, "paused") {
		t.Fatalf("api error %d type %q code %q message %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
	}
	if fake.Count() != 0 {
		t.Fatalf("the upstream saw %d requests while lending was paused", fake.Count())
	}
	if _, err := client.Models.List(ctx); err != nil {
		t.Fatalf("model listing while paused: %v", err)
	}
	e.waitCounter(t, gate.OutcomeNotLending, 1)
}

// TestOllamaClientThroughGate: Ollama's own Go client streams a chat
// through a gate (the first chunk arrives while the upstream holds the
// rest), lists and shows models; while lending is paused Chat gets a clean
// api.StatusError 503 naming the reason and the upstream sees nothing,
// while List still works; after resuming, chat works again.
func TestOllamaClientThroughGate(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(4))
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL})
	c := ollamaClient(t, e, aliceToken)
	ctx := waitCtx(t)
	chatReq := &ollama.ChatRequest{Model: "llama3.2", Messages: []ollama.Message{{Role: "user", Content: "Say something"}}}

	release := fake.Hold()
	first := make(chan struct{})
	done := make(chan error, 1)
	var chunks []ollama.ChatResponse
	go func() {
		done <- c.Chat(ctx, chatReq, func(r ollama.ChatResponse) error {
			chunks = append(chunks, r)
			if len(chunks) == 1 {
				close(first)
			}
			return nil
		})
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("chat ended before its first chunk: %v", err)
	case <-ctx.Done():
		t.Fatal("no first chunk while the upstream holds the stream: the gate buffers")
	}
	if fake.InFlight() != 1 {
		t.Fatalf("upstream in flight %d while its stream is held", fake.InFlight())
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ch := range chunks {
		text.WriteString(ch.Message.Content)
	}
	if text.String() != fakeupstream.Text(4) || !chunks[len(chunks)-1].Done {
		t.Fatalf("streamed %q, %d chunks", text.String(), len(chunks))
	}

	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, "llama3.2:latest") {
		t.Fatalf("List: %v", names)
	}
	show, err := c.Show(ctx, &ollama.ShowRequest{Model: "llama3.2"})
	if err != nil {
		t.Fatal(err)
	}
	if show.Details.Family == "" || show.Details.QuantizationLevel == "" {
		t.Fatalf("Show: %+v", show.Details)
	}

	// Paused: a clean error, nothing upstream.
	e.Switches.Pause(lending.Pauser{Via: "test"})
	before := fake.Count()
	err = c.Chat(ctx, chatReq, func(ollama.ChatResponse) error { return nil })
	var se ollama.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("paused chat: %T %v, want api.StatusError", err, err)
	}
	if se.StatusCode != http.StatusServiceUnavailable || !strings.Contains(se.ErrorMessage, string(lending.ReasonLendingPaused)) {
		t.Fatalf("paused chat: %d %q", se.StatusCode, se.ErrorMessage)
	}
	err = c.Generate(ctx, &ollama.GenerateRequest{Model: "llama3.2", Prompt: "hi"}, func(ollama.GenerateResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("paused generate: %v", err)
	}
	if fake.Count() != before {
		t.Fatalf("the upstream saw %d requests while lending was paused", fake.Count()-before)
	}
	if _, err := c.List(ctx); err != nil {
		t.Fatalf("List while paused: %v", err)
	}
	if _, err := c.Show(ctx, &ollama.ShowRequest{Model: "llama3.2"}); err != nil {
		t.Fatalf("Show while paused: %v", err)
	}
	e.waitCounter(t, gate.OutcomeNotLending, 2)

	e.Switches.Resume()
	e.waitLendable(t)
	if err := c.Chat(ctx, chatReq, func(ollama.ChatResponse) error { return nil }); err != nil {
		t.Fatalf("chat after resume: %v", err)
	}
	for _, r := range fake.Requests() {
		if r.Header.Get("Authorization") != "" {
			t.Fatalf("a borrower token reached the upstream on %s", r.Path)
		}
	}
}

// TestOllamaClientNeedsToken: without a borrow token (or with a read-only
// one) the client gets a 401/403 and the upstream sees nothing.
func TestOllamaClientNeedsToken(t *testing.T) {
	fake := fakeupstream.StartOllama(t)
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL})
	u, _ := url.Parse(e.URL)
	for _, hc := range []*http.Client{{Transport: &http.Transport{Proxy: nil}}, borrowerClient(readerToken), borrowerClient("not-a-configured-token-0123456789")} {
		_, err := ollama.NewClient(u, hc).List(context.Background())
		if err == nil {
			t.Fatal("List without a borrow token succeeded")
		}
	}
	if fake.Count() != 0 {
		t.Fatalf("the upstream saw %d unauthenticated requests", fake.Count())
	}
	e.waitCounter(t, gate.OutcomeAuth, 3)
}

// A reclaim that cuts an Ollama stream ends it with an error line, so
// Ollama's own client reports an error instead of a complete answer.
func TestOllamaClientSeesCutStreamAsError(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(4))
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL})
	c := ollamaClient(t, e, aliceToken)
	ctx := waitCtx(t)
	release := fake.Hold()
	defer release()
	first := make(chan struct{})
	done := make(chan error, 1)
	var sawDone bool
	go func() {
		n := 0
		done <- c.Chat(ctx, &ollama.ChatRequest{Model: "llama3.2", Messages: []ollama.Message{{Role: "user", Content: "Say something"}}},
			func(r ollama.ChatResponse) error {
				if n++; n == 1 {
					close(first)
				}
				sawDone = sawDone || r.Done
				return nil
			})
	}()
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("no first chunk")
	}
	e.Switches.Pause(lendingPauser) // the engine reclaims: grace 0, the stream is cut
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the reclaim never cut the stream")
	}
	if err == nil || !strings.Contains(err.Error(), "reclaimed") || sawDone {
		t.Fatalf("cut stream: err=%v, final chunk seen=%v; want an error naming the reclaim", err, sawDone)
	}
	e.waitCounter(t, gate.OutcomeReclaimed, 1)
}
