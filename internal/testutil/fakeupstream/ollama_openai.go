package fakeupstream

// Ollama's OpenAI compatibility routes: /v1/chat/completions,
// /v1/completions, /v1/embeddings and /v1/models.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
)

// OpenAI compatibility (middleware/openai.go, openai/openai.go).

type oaiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   any     `json:"param"`
	Code    *string `json:"code"`
}

// ollamaV1Error answers an OpenAI-shaped error the way Ollama does: the
// middleware's own rejections carry their type; an error from the native
// handler keeps its status but is typed as openai.NewError(500, ...).
func ollamaV1Error(w http.ResponseWriter, status int, fromHandler bool, msg string) {
	typ := "api_error"
	if !fromHandler {
		switch status {
		case http.StatusBadRequest:
			typ = "invalid_request_error"
		case http.StatusNotFound:
			typ = "not_found_error"
		}
	}
	writeJSON(w, status, "application/json", map[string]any{"error": oaiError{Message: msg, Type: typ}})
}

// v1Model reads the body of an OpenAI request as Ollama's middleware does.
func v1Bind(w http.ResponseWriter, r *http.Request, v any) bool {
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, v); err != nil {
		if len(bytes.TrimSpace(body)) == 0 {
			err = io.EOF
		}
		ollamaV1Error(w, http.StatusBadRequest, false, err.Error())
		return false
	}
	return true
}

type oaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type oaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type ollamaDelta struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type ollamaChunkChoice struct {
	Index        int         `json:"index"`
	Delta        ollamaDelta `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type ollamaChunk struct {
	ID                string              `json:"id"`
	Object            string              `json:"object"`
	Created           int64               `json:"created"`
	Model             string              `json:"model"`
	SystemFingerprint string              `json:"system_fingerprint"`
	Choices           []ollamaChunkChoice `json:"choices"`
	Usage             *oaiUsage           `json:"usage,omitempty"`
}

func writeSSE(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return writeChunk(w, r, []byte("data: "+string(b)+"\n\n"))
}

func messageText(content any) (string, error) {
	switch c := content.(type) {
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		for _, p := range c {
			part, ok := p.(map[string]any)
			if !ok {
				return "", errors.New("invalid message format")
			}
			switch part["type"] {
			case "text":
				t, ok := part["text"].(string)
				if !ok {
					return "", errors.New("invalid message format")
				}
				b.WriteString(t)
			case "image_url":
			default:
				return "", errors.New("invalid message format")
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("invalid message content type: %T", content)
}

func (o *Ollama) v1Chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string `json:"role"`
			Content   any    `json:"content"`
			ToolCalls []any  `json:"tool_calls"`
		} `json:"messages"`
		Stream        bool              `json:"stream"`
		StreamOptions *oaiStreamOptions `json:"stream_options"`
		MaxTokens     *int              `json:"max_tokens"`
	}
	if !v1Bind(w, r, &req) {
		return
	}
	if len(req.Messages) == 0 {
		ollamaV1Error(w, http.StatusBadRequest, false, "[] is too short - 'messages'")
		return
	}
	var texts []string
	for _, m := range req.Messages {
		if m.Content == nil && m.ToolCalls != nil {
			continue
		}
		t, err := messageText(m.Content)
		if err != nil {
			ollamaV1Error(w, http.StatusBadRequest, false, err.Error())
			return
		}
		texts = append(texts, t)
	}
	if strings.TrimSpace(req.Model) == "" {
		ollamaV1Error(w, http.StatusBadRequest, true, "model is required")
		return
	}
	m, ok := o.v1KnownModel(w, req.Model)
	if !ok {
		return
	}
	if m.embed {
		ollamaV1Error(w, http.StatusBadRequest, true, fmt.Sprintf("%q does not support chat", req.Model))
		return
	}
	o.acquire(m.name, keepAlive{})
	defer o.release(m.name)
	n, cut := o.genCount(deref(req.MaxTokens))
	reason := doneReason(cut)
	id := fmt.Sprintf("chatcmpl-%d", rand.IntN(999))
	usage := oaiUsage{PromptTokens: countWords(texts...), CompletionTokens: n, TotalTokens: countWords(texts...) + n}
	if !req.Stream {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
		}
		writeJSON(w, http.StatusOK, "application/json", map[string]any{
			"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"system_fingerprint": "fp_ollama",
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": Text(n)},
				"finish_reason": reason}},
			"usage": usage,
		})
		return
	}
	chunk := func(content string, finish *string) ollamaChunk {
		return ollamaChunk{ID: id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: req.Model,
			SystemFingerprint: "fp_ollama",
			Choices:           []ollamaChunkChoice{{Delta: ollamaDelta{Role: "assistant", Content: content}, FinishReason: finish}}}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i := 0; i < n; i++ {
		if !o.pace(r, i) || !writeSSE(w, r, chunk(Token(i), nil)) {
			return
		}
	}
	last := chunk("", &reason)
	if !writeSSE(w, r, last) {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		last.Usage, last.Choices = &usage, []ollamaChunkChoice{}
		if !writeSSE(w, r, last) {
			return
		}
	}
	writeChunk(w, r, []byte("data: [DONE]\n\n"))
}

func (o *Ollama) v1Completions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model         string            `json:"model"`
		Prompt        string            `json:"prompt"`
		Stream        bool              `json:"stream"`
		StreamOptions *oaiStreamOptions `json:"stream_options"`
		MaxTokens     *int              `json:"max_tokens"`
	}
	if !v1Bind(w, r, &req) {
		return
	}
	m, ok := o.v1KnownModel(w, req.Model)
	if !ok {
		return
	}
	if m.embed {
		ollamaV1Error(w, http.StatusBadRequest, true, fmt.Sprintf("%q does not support generate", req.Model))
		return
	}
	o.acquire(m.name, keepAlive{})
	defer o.release(m.name)
	n, cut := o.genCount(deref(req.MaxTokens))
	reason := doneReason(cut)
	id := fmt.Sprintf("cmpl-%d", rand.IntN(999))
	usage := oaiUsage{PromptTokens: countWords(req.Prompt), CompletionTokens: n, TotalTokens: countWords(req.Prompt) + n}
	type choice struct {
		Text         string  `json:"text"`
		Index        int     `json:"index"`
		FinishReason *string `json:"finish_reason"`
	}
	type completion struct {
		ID                string    `json:"id"`
		Object            string    `json:"object"`
		Created           int64     `json:"created"`
		Choices           []choice  `json:"choices"`
		Model             string    `json:"model"`
		SystemFingerprint string    `json:"system_fingerprint"`
		Usage             *oaiUsage `json:"usage,omitempty"`
	}
	mk := func(text string, finish *string) completion {
		return completion{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: req.Model,
			SystemFingerprint: "fp_ollama", Choices: []choice{{Text: text, FinishReason: finish}}}
	}
	if !req.Stream {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
		}
		c := mk(Text(n), &reason)
		c.Usage = &usage
		writeJSON(w, http.StatusOK, "application/json", c)
		return
	}
	withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i := 0; i <= n; i++ {
		c := mk("", &reason)
		if i < n {
			if !o.pace(r, i) {
				return
			}
			c = mk(Token(i), nil)
		}
		if withUsage {
			c.Usage = &oaiUsage{}
		}
		if !writeSSE(w, r, c) {
			return
		}
	}
	if withUsage {
		c := mk("", &reason)
		c.Choices, c.Usage = []choice{}, &usage
		if !writeSSE(w, r, c) {
			return
		}
	}
	writeChunk(w, r, []byte("data: [DONE]\n\n"))
}

func (o *Ollama) v1Embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input          any    `json:"input"`
		Model          string `json:"model"`
		Dimensions     int    `json:"dimensions"`
		EncodingFormat string `json:"encoding_format"`
	}
	if !v1Bind(w, r, &req) {
		return
	}
	input, ok := embedInputs(req.Input)
	if !ok || len(input) == 0 {
		ollamaV1Error(w, http.StatusBadRequest, false, "invalid input")
		return
	}
	m, ok := o.v1KnownModel(w, req.Model)
	if !ok {
		return
	}
	o.acquire(m.name, keepAlive{})
	defer o.release(m.name)
	dim := cmp.Or(req.Dimensions, ollamaEmbedDim)
	var data []map[string]any
	for i, in := range input {
		vec := toFloat32(embedding(in, dim))
		var emb any = vec
		if strings.EqualFold(req.EncodingFormat, "base64") {
			emb = floatsBase64(vec)
		}
		data = append(data, map[string]any{"object": "embedding", "embedding": emb, "index": i})
	}
	tokens := countWords(input...)
	writeJSON(w, http.StatusOK, "application/json", map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

func floatsBase64(v []float32) string {
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, v)
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

type ollamaV1Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ownedBy is the namespace of a model name ("library" for plain names).
func ownedBy(name string) string {
	parts := strings.Split(name, "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2]
	}
	return "library"
}

func (o *Ollama) v1Models(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	var data []ollamaV1Model
	for _, m := range o.models {
		data = append(data, ollamaV1Model{ID: m.name, Object: "model", Created: m.modified.Unix(), OwnedBy: ownedBy(m.name)})
	}
	o.mu.Unlock()
	slices.SortStableFunc(data, func(a, b ollamaV1Model) int {
		return cmp.Or(cmp.Compare(b.Created, a.Created), cmp.Compare(a.ID, b.ID))
	})
	writeJSON(w, http.StatusOK, "application/json", map[string]any{"object": "list", "data": data})
}

func (o *Ollama) v1Model(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	m, ok := o.v1KnownModel(w, name)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, "application/json", ollamaV1Model{ID: name, Object: "model", Created: m.modified.Unix(), OwnedBy: ownedBy(name)})
}

// v1KnownModel finds a model, answering the /v1 routes' 404 when there is none;
// ok is false when an answer was written.
func (o *Ollama) v1KnownModel(w http.ResponseWriter, name string) (*ollamaModel, bool) {
	m, ok := o.model(name)
	if !ok {
		ollamaV1Error(w, http.StatusNotFound, true, fmt.Sprintf("model '%s' not found", name))
	}
	return m, ok
}

// deref is *p, or zero for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
