package fakeupstream

// Embeddings: /v1/embeddings and llama.cpp's native /embedding.

import (
	"encoding/json"
	"net/http"
)

func embedStrings(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		var out []string
		for _, e := range t {
			switch s := e.(type) {
			case string:
				out = append(out, s)
			default:
				b, _ := json.Marshal(s)
				out = append(out, string(b))
			}
		}
		return out, len(out) > 0
	}
	return nil, false
}

func (o *OpenAI) embeddingsOAI(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	raw, has := body["input"]
	if !has {
		raw, has = body["content"]
	}
	if !has {
		llamaError(w, http.StatusBadRequest, "\"input\" or \"content\" must be provided", "invalid_request_error")
		return
	}
	inputs, ok := embedStrings(raw)
	if !ok {
		llamaError(w, http.StatusBadRequest, "\"input\" must be a string or an array", "invalid_request_error")
		return
	}
	var data []map[string]any
	tokens := 0
	for i, in := range inputs {
		vec := toFloat32(embedding(in, ollamaEmbedDim))
		var emb any = vec
		if strField(body, "encoding_format") == "base64" {
			emb = floatsBase64(vec)
		}
		data = append(data, map[string]any{"embedding": emb, "index": i, "object": "embedding"})
		tokens += countWords(in)
	}
	llamaOK(w, map[string]any{
		"model": o.modelName(body), "object": "list",
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}, "data": data,
	})
}

func (o *OpenAI) embeddingsNative(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	raw, has := body["content"]
	if !has {
		raw, has = body["input"]
	}
	if !has {
		llamaError(w, http.StatusBadRequest, "\"input\" or \"content\" must be provided", "invalid_request_error")
		return
	}
	inputs, _ := embedStrings(raw)
	var out []map[string]any
	for i, in := range inputs {
		out = append(out, map[string]any{"index": i, "embedding": [][]float32{toFloat32(embedding(in, ollamaEmbedDim))}})
	}
	llamaOK(w, out)
}
