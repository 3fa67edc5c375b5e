package fakeupstream

// The model management routes: pull, push, create, copy, delete and blobs.

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// progress streams Ollama progress lines (or, with stream false, the last).
func (o *Ollama) progress(w http.ResponseWriter, r *http.Request, stream *bool, lines []map[string]any) bool {
	if stream != nil && !*stream {
		for i := range lines {
			if !o.pace(r, i) {
				return false
			}
		}
		writeJSON(w, http.StatusOK, ctJSON, lines[len(lines)-1])
		return true
	}
	w.Header().Set("Content-Type", ctNDJSON)
	w.WriteHeader(http.StatusOK)
	for i, l := range lines {
		if !o.pace(r, i) || !writeNDJSON(w, r, l) {
			return false
		}
	}
	return true
}

func (o *Ollama) pull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Name   string `json:"name"`
		Stream *bool  `json:"stream"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	name := ollamaName(cmp.Or(req.Model, req.Name))
	if name == "" {
		ollamaError(w, http.StatusBadRequest, "invalid model name")
		return
	}
	sum := sha256.Sum256([]byte("layer:" + name))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	const total = 2019377376
	lines := []map[string]any{
		{"status": "pulling manifest"},
		{"status": "pulling " + digest[7:19], "digest": digest, "total": total, "completed": total / 2},
		{"status": "pulling " + digest[7:19], "digest": digest, "total": total, "completed": total},
		{"status": "verifying sha256 digest"},
		{"status": "writing manifest"},
		{"status": "success"},
	}
	if o.progress(w, r, req.Stream, lines) {
		if _, ok := o.model(name); !ok {
			o.addModel(name, time.Now().UTC())
		}
	}
}

func (o *Ollama) push(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Name   string `json:"name"`
		Stream *bool  `json:"stream"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	name := cmp.Or(req.Model, req.Name)
	m, ok := o.model(name)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	lines := []map[string]any{
		{"status": "retrieving manifest"},
		{"status": "pushing " + m.digest[:12], "digest": "sha256:" + m.digest, "total": m.size, "completed": m.size},
		{"status": "pushing manifest"},
		{"status": "success"},
	}
	o.progress(w, r, req.Stream, lines)
}

func (o *Ollama) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Name   string `json:"name"`
		From   string `json:"from"`
		Stream *bool  `json:"stream"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	name := ollamaName(cmp.Or(req.Model, req.Name))
	if name == "" {
		ollamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	lines := []map[string]any{{"status": "writing manifest"}, {"status": "success"}}
	if req.From != "" {
		from, ok := o.model(req.From)
		if !ok {
			ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.From))
			return
		}
		lines = append([]map[string]any{{"status": "using existing layer sha256:" + from.digest}}, lines...)
	}
	if o.progress(w, r, req.Stream, lines) {
		o.addModel(name, time.Now().UTC())
	}
}

func (o *Ollama) copyModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	if req.Source == "" {
		ollamaError(w, http.StatusBadRequest, fmt.Sprintf("source %q is invalid", req.Source))
		return
	}
	if req.Destination == "" {
		ollamaError(w, http.StatusBadRequest, fmt.Sprintf("destination %q is invalid", req.Destination))
		return
	}
	src, ok := o.model(req.Source)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model %q not found", req.Source))
		return
	}
	dst := o.addModel(req.Destination, time.Now().UTC())
	o.mu.Lock()
	dst.family, dst.params, dst.quant, dst.size, dst.embed, dst.ctxLen, dst.digest = src.family, src.params, src.quant, src.size, src.embed, src.ctxLen, src.digest
	o.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (o *Ollama) delete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	name := cmp.Or(req.Model, req.Name)
	if name == "" {
		ollamaError(w, http.StatusBadRequest, fmt.Sprintf("name %q is invalid", name))
		return
	}
	m, ok := o.model(name)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	o.mu.Lock()
	delete(o.models, m.name)
	delete(o.loaded, m.name)
	o.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func (o *Ollama) headBlob(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("digest")
	if !validDigest(d) {
		ollamaError(w, http.StatusBadRequest, "invalid digest format")
		return
	}
	o.mu.Lock()
	ok := o.blobs[d]
	o.mu.Unlock()
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("blob %q not found", d))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (o *Ollama) postBlob(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("digest")
	if !validDigest(d) {
		ollamaError(w, http.StatusBadRequest, "invalid digest format")
		return
	}
	body, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(body)
	if "sha256:"+hex.EncodeToString(sum[:]) != d {
		ollamaError(w, http.StatusBadRequest, "digest mismatch")
		return
	}
	o.mu.Lock()
	o.blobs[d] = true
	o.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}
