package fakeupstream

// The native generation routes: /api/generate and /api/chat.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type ollamaMessage struct {
	Role     string   `json:"role"`
	Content  string   `json:"content"`
	Thinking string   `json:"thinking,omitempty"`
	Images   []string `json:"images,omitempty"`
}

type ollamaMetrics struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

// fakeMetrics are plausible (not measured) figures for a generation.
func fakeMetrics(prompt, eval int) ollamaMetrics {
	return ollamaMetrics{
		TotalDuration:      int64(25*time.Millisecond) + int64(eval)*int64(12*time.Millisecond),
		LoadDuration:       int64(15 * time.Millisecond),
		PromptEvalCount:    prompt,
		PromptEvalDuration: int64(prompt) * int64(time.Millisecond),
		EvalCount:          eval,
		EvalDuration:       int64(eval) * int64(12*time.Millisecond),
	}
}

type generateResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Response   string    `json:"response"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	Context    []int     `json:"context,omitempty"`
	ollamaMetrics
}

type chatResponse struct {
	Model      string        `json:"model"`
	CreatedAt  time.Time     `json:"created_at"`
	Message    ollamaMessage `json:"message"`
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason,omitempty"`
	ollamaMetrics
}

func numPredict(opts map[string]any) int {
	if v, ok := opts["num_predict"].(float64); ok {
		return int(v)
	}
	return 0
}

func doneReason(cut bool) string {
	if cut {
		return "length"
	}
	return "stop"
}

func (o *Ollama) generate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string          `json:"model"`
		Prompt    string          `json:"prompt"`
		Suffix    string          `json:"suffix"`
		System    string          `json:"system"`
		Stream    *bool           `json:"stream"`
		Raw       bool            `json:"raw"`
		KeepAlive json.RawMessage `json:"keep_alive"`
		Images    []string        `json:"images"`
		Options   map[string]any  `json:"options"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	ka, ok := keepAliveOf(w, req.KeepAlive)
	if !ok {
		return
	}
	m, ok := o.knownModel(w, req.Model)
	if !ok {
		return
	}
	if req.Prompt == "" && ka.set && !ka.forever && ka.d == 0 {
		o.unload(m.name)
		writeJSON(w, http.StatusOK, ctJSON, generateResponse{Model: req.Model, CreatedAt: nowUTC(), Done: true, DoneReason: "unload"})
		return
	}
	if m.embed {
		ollamaError(w, http.StatusBadRequest, fmt.Sprintf("%q does not support generate", req.Model))
		return
	}
	o.acquire(m.name, ka)
	defer o.release(m.name)
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, ctJSON, generateResponse{Model: req.Model, CreatedAt: nowUTC(), Done: true, DoneReason: "load"})
		return
	}
	n, cut := o.genCount(numPredict(req.Options))
	promptTokens := countWords(req.System, req.Prompt)
	final := func(text string) generateResponse {
		g := generateResponse{Model: req.Model, CreatedAt: nowUTC(), Response: text, Done: true,
			DoneReason: doneReason(cut), ollamaMetrics: fakeMetrics(promptTokens, n)}
		if !req.Raw {
			for i := 0; i < promptTokens+n; i++ {
				g.Context = append(g.Context, 100+i)
			}
		}
		return g
	}
	o.answer(w, r, req.Stream, n, func(text string) any { return final(text) }, func(i int) any {
		return generateResponse{Model: req.Model, CreatedAt: nowUTC(), Response: Token(i)}
	})
}

// answer sends n generated tokens as Ollama does: one NDJSON object per
// token and then final("") when streaming (the default), or final(all the
// text) as one JSON object when stream is false. Either way the tokens are
// paced (and held) like a real generation.
func (o *Ollama) answer(w http.ResponseWriter, r *http.Request, stream *bool, n int, final func(text string) any, chunk func(i int) any) {
	if stream != nil && !*stream {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
		}
		writeJSON(w, http.StatusOK, ctJSON, final(Text(n)))
		return
	}
	w.Header().Set("Content-Type", ctNDJSON)
	w.WriteHeader(http.StatusOK)
	for i := 0; i < n; i++ {
		if !o.pace(r, i) {
			return
		}
		if !writeNDJSON(w, r, chunk(i)) {
			return
		}
	}
	writeNDJSON(w, r, final(""))
}

func writeNDJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return writeChunk(w, r, append(b, '\n'))
}

func (o *Ollama) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string          `json:"model"`
		Messages  []ollamaMessage `json:"messages"`
		Stream    *bool           `json:"stream"`
		KeepAlive json.RawMessage `json:"keep_alive"`
		Options   map[string]any  `json:"options"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	ka, ok := keepAliveOf(w, req.KeepAlive)
	if !ok {
		return
	}
	if strings.TrimSpace(req.Model) == "" {
		ollamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := o.knownModel(w, req.Model)
	if !ok {
		return
	}
	if len(req.Messages) == 0 && ka.set && !ka.forever && ka.d == 0 {
		o.unload(m.name)
		writeJSON(w, http.StatusOK, ctJSON, chatResponse{Model: req.Model, CreatedAt: nowUTC(),
			Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "unload"})
		return
	}
	if m.embed {
		ollamaError(w, http.StatusBadRequest, fmt.Sprintf("%q does not support chat", req.Model))
		return
	}
	o.acquire(m.name, ka)
	defer o.release(m.name)
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusOK, ctJSON, chatResponse{Model: req.Model, CreatedAt: nowUTC(),
			Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	var texts []string
	for _, msg := range req.Messages {
		texts = append(texts, msg.Content)
	}
	n, cut := o.genCount(numPredict(req.Options))
	final := func(text string) chatResponse {
		return chatResponse{Model: req.Model, CreatedAt: nowUTC(), Message: ollamaMessage{Role: "assistant", Content: text},
			Done: true, DoneReason: doneReason(cut), ollamaMetrics: fakeMetrics(countWords(texts...), n)}
	}
	o.answer(w, r, req.Stream, n, func(text string) any { return final(text) }, func(i int) any {
		return chatResponse{Model: req.Model, CreatedAt: nowUTC(), Message: ollamaMessage{Role: "assistant", Content: Token(i)}}
	})
}
