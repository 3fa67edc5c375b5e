package fakeupstream

// The native embedding routes: /api/embed and /api/embeddings.

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// embedInputs reads EmbedRequest.input: a string or a list of strings.
func embedInputs(raw any) ([]string, bool) {
	switch v := raw.(type) {
	case nil:
		return nil, true
	case string:
		if v == "" {
			return nil, true
		}
		return []string{v}, true
	case []any:
		var out []string
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

const ollamaEmbedDim = 32

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}

func (o *Ollama) embed(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model      string          `json:"model"`
		Input      any             `json:"input"`
		KeepAlive  json.RawMessage `json:"keep_alive"`
		Dimensions int             `json:"dimensions"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	ka, ok := keepAliveOf(w, req.KeepAlive)
	if !ok {
		return
	}
	input, ok := embedInputs(req.Input)
	if !ok {
		ollamaError(w, http.StatusBadRequest, "invalid input type")
		return
	}
	m, ok := o.knownModel(w, req.Model)
	if !ok {
		return
	}
	o.acquire(m.name, ka)
	defer o.release(m.name)
	dim := cmp.Or(req.Dimensions, ollamaEmbedDim)
	embs := [][]float32{}
	for _, in := range input {
		embs = append(embs, toFloat32(embedding(in, dim)))
	}
	resp := map[string]any{"model": req.Model, "embeddings": embs}
	if len(input) > 0 {
		resp["total_duration"] = int64(20 * time.Millisecond)
		resp["load_duration"] = int64(5 * time.Millisecond)
		resp["prompt_eval_count"] = countWords(input...)
	}
	writeJSON(w, http.StatusOK, ctJSON, resp)
}

func (o *Ollama) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string          `json:"model"`
		Prompt    string          `json:"prompt"`
		KeepAlive json.RawMessage `json:"keep_alive"`
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
	o.acquire(m.name, ka)
	defer o.release(m.name)
	emb := []float64{}
	if req.Prompt != "" {
		emb = embedding(req.Prompt, ollamaEmbedDim)
	}
	writeJSON(w, http.StatusOK, ctJSON, map[string]any{"embedding": emb})
}
