package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// DefaultOpenAIModel is the llama.cpp fake's model alias without WithModels.
const DefaultOpenAIModel = "Llama-3.2-1B-Instruct-Q4_K_M.gguf"

// OpenAI fakes llama.cpp's llama-server (tools/server), the usual
// OpenAI-compatible upstream: one loaded model, n_parallel slots.
type OpenAI struct {
	*Server

	alias   string
	build   string
	created int64
	slots   int

	mu        sync.Mutex
	taskID    int
	busy      map[int]int // slot -> task
	vocab     map[string]int
	pieces    []string
	promptTok int
	predTok   int
	decodes   int
	maxTok    int
}

// StartOpenAI starts a llama.cpp llama-server fake on a loopback port.
func StartOpenAI(t testing.TB, opts ...Option) *OpenAI {
	t.Helper()
	o := &OpenAI{
		Server:  newServer(KindOpenAI, opts),
		alias:   DefaultOpenAIModel,
		created: time.Now().Unix(),
		slots:   4,
		busy:    map[int]int{},
		vocab:   map[string]int{},
	}
	if len(o.cfg.models) > 0 {
		o.alias = o.cfg.models[0]
	}
	o.build = "b6500-" + randomHex(4)[:7]
	if o.cfg.version != "" {
		o.build = o.cfg.version
	}
	o.unauth = func(w http.ResponseWriter, r *http.Request) {
		llamaError(w, http.StatusUnauthorized, "Invalid API Key", "authentication_error")
	}
	o.public = func(r *http.Request) bool {
		switch r.URL.Path {
		case "/health", "/v1/health", "/models", "/v1/models", "/":
			return r.Method == http.MethodGet || r.Method == http.MethodHead
		}
		return false
	}
	o.handler = o.routes()
	o.listen(t)
	return o
}

// Model is the alias the fake reports as its loaded model.
func (o *OpenAI) Model() string { return o.alias }

// llamaError writes llama.cpp's error shape (format_error_response).
func llamaError(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Server", "llama.cpp")
	writeJSON(w, status, "application/json; charset=utf-8", map[string]any{
		"error": map[string]any{"code": status, "message": msg, "type": typ},
	})
}

func llamaOK(w http.ResponseWriter, v any) {
	w.Header().Set("Server", "llama.cpp")
	writeJSON(w, http.StatusOK, "application/json; charset=utf-8", v)
}

func (o *OpenAI) routes() http.Handler {
	rt := &router{
		autoHead: true,
		notFound: func(w http.ResponseWriter, r *http.Request) {
			llamaError(w, http.StatusNotFound, "File Not Found", "not_found_error")
		},
	}
	health := func(w http.ResponseWriter, r *http.Request) { llamaOK(w, map[string]string{"status": "ok"}) }
	rt.handle("GET", "/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><html><head><title>llama.cpp - chat</title></head><body></body></html>")
	})
	rt.handle("GET", "/health", health)
	rt.handle("GET", "/v1/health", health)
	rt.handle("GET", "/metrics", o.metrics)
	rt.handle("GET", "/props", o.props)
	rt.handle("POST", "/props", func(w http.ResponseWriter, r *http.Request) {
		llamaError(w, http.StatusNotImplemented, "This server does not support changing global properties. Start it with `--props`", "not_supported_error")
	})
	rt.handle("GET", "/models", o.models)
	rt.handle("GET", "/v1/models", o.models)
	rt.handle("POST", "/completion", o.completion)
	rt.handle("POST", "/completions", o.completion)
	rt.handle("POST", "/infill", o.completion)
	rt.handle("POST", "/v1/completions", o.oaiCompletions)
	rt.handle("POST", "/chat/completions", o.chat)
	rt.handle("POST", "/v1/chat/completions", o.chat)
	rt.handle("POST", "/embedding", o.embeddingsNative)
	rt.handle("POST", "/embeddings", o.embeddingsNative)
	rt.handle("POST", "/v1/embeddings", o.embeddingsOAI)
	rt.handle("POST", "/tokenize", o.tokenize)
	rt.handle("POST", "/detokenize", o.detokenize)
	rt.handle("POST", "/apply-template", o.applyTemplate)
	rt.handle("GET", "/lora-adapters", func(w http.ResponseWriter, r *http.Request) { llamaOK(w, []any{}) })
	rt.handle("GET", "/slots", o.getSlots)
	rt.handle("POST", "/slots/{id_slot}", o.postSlot)
	return rt
}

// parseBody parses a JSON body; like llama.cpp (json::parse throwing a
// non invalid_argument exception) a bad body is a 500 server_error.
func parseBody(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		msg := "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"
		if len(bytes.TrimSpace(body)) > 0 {
			msg = "[json.exception.parse_error.101] parse error: syntax error while parsing value - " + fmt.Sprint(err)
		}
		llamaError(w, http.StatusInternalServerError, msg, "server_error")
		return nil, false
	}
	return m, true
}

func intField(m map[string]any, keys ...string) int {
	for _, k := range keys {
		switch v := m[k].(type) {
		case json.Number:
			if n, err := v.Int64(); err == nil {
				return int(n)
			}
			if f, err := v.Float64(); err == nil {
				return int(f)
			}
		case float64:
			return int(v)
		}
	}
	return 0
}

func boolField(m map[string]any, key string) bool {
	b, _ := m[key].(bool)
	return b
}

func strField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
