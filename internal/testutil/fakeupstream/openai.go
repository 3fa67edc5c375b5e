package fakeupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
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

// task takes a slot for a generation; done gives it back and counts
// tokens for /metrics.
func (o *OpenAI) task() (slot, id int, done func(prompt, predicted int)) {
	o.mu.Lock()
	o.taskID++
	id = o.taskID
	slot = -1
	for i := 0; i < o.slots; i++ {
		if _, ok := o.busy[i]; !ok {
			slot = i
			break
		}
	}
	if slot >= 0 {
		o.busy[slot] = id
	}
	o.mu.Unlock()
	return slot, id, func(prompt, predicted int) {
		o.mu.Lock()
		if slot >= 0 {
			delete(o.busy, slot)
		}
		o.promptTok += prompt
		o.predTok += predicted
		o.decodes += predicted + 1
		if prompt+predicted > o.maxTok {
			o.maxTok = prompt + predicted
		}
		o.mu.Unlock()
	}
}

func timings(prompt, predicted int) map[string]any {
	pms, gms := float64(prompt)*1.5, float64(predicted)*12.5
	per := func(ms float64, n int) (float64, float64) {
		if n == 0 || ms == 0 {
			return 0, 0
		}
		return ms / float64(n), 1e3 * float64(n) / ms
	}
	ppt, pps := per(pms, prompt)
	gpt, gps := per(gms, predicted)
	return map[string]any{
		"cache_n": 0, "prompt_n": prompt, "prompt_ms": pms, "prompt_per_token_ms": ppt, "prompt_per_second": pps,
		"predicted_n": predicted, "predicted_ms": gms, "predicted_per_token_ms": gpt, "predicted_per_second": gps,
	}
}

func oaiUsageJSON(prompt, predicted int) map[string]any {
	return map[string]any{
		"completion_tokens": predicted, "prompt_tokens": prompt, "total_tokens": prompt + predicted,
		"prompt_tokens_details": map[string]any{"cached_tokens": 0},
	}
}

// modelName is the model a response reports: the request's, else the alias.
func (o *OpenAI) modelName(m map[string]any) string {
	if s := strField(m, "model"); s != "" {
		return s
	}
	return o.alias
}

func messagesText(m map[string]any) ([]string, error) {
	raw, ok := m["messages"]
	if !ok {
		return nil, errors.New("'messages' is required")
	}
	list, ok := raw.([]any)
	if !ok {
		//lint:ignore ST1005 llama.cpp's own message, verbatim
		return nil, errors.New("Expected 'messages' to be an array")
	}
	var out []string
	for _, e := range list {
		msg, ok := e.(map[string]any)
		if !ok {
			//lint:ignore ST1005 llama.cpp's own message, verbatim
			return nil, errors.New("Expected 'messages' to be an array of objects")
		}
		if msg["content"] == nil {
			out = append(out, "")
			continue
		}
		t, err := messageText(msg["content"])
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (o *OpenAI) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	texts, err := messagesText(body)
	if err != nil {
		llamaError(w, http.StatusBadRequest, err.Error(), "invalid_request_error")
		return
	}
	n, cut := o.genCount(intField(body, "max_completion_tokens", "max_tokens", "n_predict"))
	finish := "stop"
	if cut {
		finish = "length"
	}
	prompt := countWords(texts...) + 4*len(texts)
	model := o.modelName(body)
	id := "chatcmpl-" + randomAlnum(32)
	_, _, done := o.task()
	generated := 0
	defer func() { done(prompt, generated) }()

	if !boolField(body, "stream") {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
			generated++
		}
		llamaOK(w, map[string]any{
			"choices": []map[string]any{{"finish_reason": finish, "index": 0,
				"message": map[string]any{"role": "assistant", "content": Text(n)}}},
			"created": time.Now().Unix(), "model": model, "system_fingerprint": o.build,
			"object": "chat.completion", "usage": oaiUsageJSON(prompt, n), "id": id,
			"timings": timings(prompt, n),
		})
		return
	}
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage = boolField(so, "include_usage")
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"choices": []map[string]any{{"finish_reason": finish, "index": 0, "delta": delta}},
			"created": time.Now().Unix(), "id": id, "model": model,
			"system_fingerprint": o.build, "object": "chat.completion.chunk",
		}
	}
	w.Header().Set("Server", "llama.cpp")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i := 0; i < n; i++ {
		if !o.pace(r, i) {
			return
		}
		if i == 0 && !writeSSE(w, r, chunk(map[string]any{"role": "assistant", "content": nil}, nil)) {
			return
		}
		if !writeSSE(w, r, chunk(map[string]any{"content": Token(i)}, nil)) {
			return
		}
		generated++
	}
	last := chunk(map[string]any{}, finish)
	if !includeUsage {
		last["timings"] = timings(prompt, n)
	}
	if !writeSSE(w, r, last) {
		return
	}
	if includeUsage {
		u := map[string]any{
			"choices": []any{}, "created": time.Now().Unix(), "id": id, "model": model,
			"system_fingerprint": o.build, "object": "chat.completion.chunk",
			"usage": oaiUsageJSON(prompt, n), "timings": timings(prompt, n),
		}
		if !writeSSE(w, r, u) {
			return
		}
	}
	writeChunk(w, r, []byte("data: [DONE]\n\n"))
}

func promptText(m map[string]any) string {
	switch p := m["prompt"].(type) {
	case string:
		return p
	case []any:
		var parts []string
		for _, e := range p {
			if s, ok := e.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	}
	return strField(m, "input_prefix") + strField(m, "input_suffix")
}

func (o *OpenAI) oaiCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	if _, ok := body["prompt"]; !ok {
		llamaError(w, http.StatusBadRequest, "\"prompt\" is required", "invalid_request_error")
		return
	}
	n, cut := o.genCount(intField(body, "max_tokens", "n_predict"))
	finish := "stop"
	if cut {
		finish = "length"
	}
	prompt := countWords(promptText(body))
	model := o.modelName(body)
	id := "cmpl-" + randomAlnum(32)
	_, _, done := o.task()
	generated := 0
	defer func() { done(prompt, generated) }()
	mk := func(text string, finish any) map[string]any {
		return map[string]any{
			"choices": []map[string]any{{"text": text, "index": 0, "logprobs": nil, "finish_reason": finish}},
			"created": time.Now().Unix(), "model": model, "system_fingerprint": o.build,
			"object": "text_completion", "id": id,
		}
	}
	if !boolField(body, "stream") {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
			generated++
		}
		c := mk(Text(n), finish)
		c["usage"] = oaiUsageJSON(prompt, n)
		c["timings"] = timings(prompt, n)
		llamaOK(w, c)
		return
	}
	w.Header().Set("Server", "llama.cpp")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i := 0; i < n; i++ {
		if !o.pace(r, i) || !writeSSE(w, r, mk(Token(i), nil)) {
			return
		}
		generated++
	}
	last := mk("", finish)
	last["timings"] = timings(prompt, n)
	if !writeSSE(w, r, last) {
		return
	}
	if so, ok := body["stream_options"].(map[string]any); ok && boolField(so, "include_usage") {
		u := mk("", nil)
		u["choices"], u["usage"] = []any{}, oaiUsageJSON(prompt, n)
		if !writeSSE(w, r, u) {
			return
		}
	}
	writeChunk(w, r, []byte("data: [DONE]\n\n"))
}

// completion is the native /completion (and /completions, /infill):
// SSE "data: {...}" events without a closing [DONE].
func (o *OpenAI) completion(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	if _, ok := body["prompt"]; !ok && r.URL.Path != "/infill" {
		llamaError(w, http.StatusBadRequest, "\"prompt\" must be provided", "invalid_request_error")
		return
	}
	n, cut := o.genCount(intField(body, "n_predict", "max_tokens"))
	prompt := countWords(promptText(body))
	slot, _, done := o.task()
	generated := 0
	defer func() { done(prompt, generated) }()
	stopType := "eos"
	if cut {
		stopType = "limit"
	}
	final := func(content string) map[string]any {
		return map[string]any{
			"index": 0, "content": content, "tokens": []int{}, "id_slot": slot, "stop": true,
			"model": o.modelName(body), "tokens_predicted": n, "tokens_evaluated": prompt,
			"generation_settings": map[string]any{"n_predict": intField(body, "n_predict"), "seed": 4294967295,
				"temperature": 0.8, "top_k": 40, "top_p": 0.95, "stream": boolField(body, "stream")},
			"prompt": promptText(body), "has_new_line": false, "truncated": false, "stop_type": stopType,
			"stopping_word": "", "tokens_cached": prompt + n, "timings": timings(prompt, n),
		}
	}
	if !boolField(body, "stream") {
		for i := 0; i < n; i++ {
			if !o.pace(r, i) {
				return
			}
			generated++
		}
		llamaOK(w, final(Text(n)))
		return
	}
	w.Header().Set("Server", "llama.cpp")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i := 0; i < n; i++ {
		if !o.pace(r, i) {
			return
		}
		ev := map[string]any{"index": 0, "content": Token(i), "tokens": []int{}, "stop": false,
			"id_slot": -1, "tokens_predicted": i + 1, "tokens_evaluated": prompt}
		if !writeSSE(w, r, ev) {
			return
		}
		generated++
	}
	writeSSE(w, r, final(""))
}

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

// tokenizeText splits text into word pieces (" word") and gives each a
// stable id, so /detokenize can reverse /tokenize.
func (o *OpenAI) tokenizeText(text string) ([]int, []string) {
	var pieces []string
	start := 0
	for i := 1; i <= len(text); i++ {
		if i == len(text) || (text[i] == ' ' && text[i-1] != ' ') {
			pieces = append(pieces, text[start:i])
			start = i
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]int, len(pieces))
	for i, p := range pieces {
		id, ok := o.vocab[p]
		if !ok {
			id = 1000 + len(o.pieces)
			o.vocab[p] = id
			o.pieces = append(o.pieces, p)
		}
		ids[i] = id
	}
	return ids, pieces
}

func (o *OpenAI) tokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	ids, pieces := o.tokenizeText(strField(body, "content"))
	if boolField(body, "add_special") {
		ids, pieces = append([]int{1}, ids...), append([]string{"<s>"}, pieces...)
	}
	if boolField(body, "with_pieces") {
		var toks []map[string]any
		for i, id := range ids {
			toks = append(toks, map[string]any{"id": id, "piece": pieces[i]})
		}
		if toks == nil {
			toks = []map[string]any{}
		}
		llamaOK(w, map[string]any{"tokens": toks})
		return
	}
	llamaOK(w, map[string]any{"tokens": ids})
}

func (o *OpenAI) detokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	list, _ := body["tokens"].([]any)
	var b strings.Builder
	o.mu.Lock()
	for _, e := range list {
		n, ok := e.(json.Number)
		if !ok {
			continue
		}
		id, err := n.Int64()
		if err != nil {
			continue
		}
		if i := int(id) - 1000; i >= 0 && i < len(o.pieces) {
			b.WriteString(o.pieces[i])
		}
	}
	o.mu.Unlock()
	llamaOK(w, map[string]any{"content": b.String()})
}

func (o *OpenAI) applyTemplate(w http.ResponseWriter, r *http.Request) {
	body, ok := parseBody(w, r)
	if !ok {
		return
	}
	list, _ := body["messages"].([]any)
	var b strings.Builder
	for _, e := range list {
		m, _ := e.(map[string]any)
		c, _ := messageText(m["content"])
		fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", strField(m, "role"), c)
	}
	b.WriteString("<|im_start|>assistant\n")
	llamaOK(w, map[string]any{"prompt": b.String()})
}

func (o *OpenAI) models(w http.ResponseWriter, r *http.Request) {
	llamaOK(w, map[string]any{
		"models": []map[string]any{{
			"name": o.alias, "model": o.alias, "modified_at": "", "size": "", "digest": "", "type": "model",
			"description": "", "tags": []string{""}, "capabilities": []string{"completion"}, "parameters": "",
			"details": map[string]any{"parent_model": "", "format": "gguf", "family": "", "families": []string{""},
				"parameter_size": "", "quantization_level": ""},
		}},
		"object": "list",
		"data": []map[string]any{{
			"id": o.alias, "object": "model", "created": o.created, "owned_by": "llamacpp",
			"meta": map[string]any{"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072, "n_embd": 2048,
				"n_params": 1235814432, "size": 799862912},
		}},
	})
}

func (o *OpenAI) slotJSON(id, task int, processing bool) map[string]any {
	return map[string]any{
		"id": id, "id_task": task, "n_ctx": 4096, "speculative": false, "is_processing": processing,
		"params": map[string]any{"n_predict": -1, "seed": 4294967295, "temperature": 0.8, "top_k": 40,
			"top_p": 0.95, "min_p": 0.05, "max_tokens": -1, "n_keep": 0, "stream": true, "samplers": []string{
				"penalties", "dry", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"}},
		"next_token": map[string]any{"has_next_token": true, "has_new_line": false, "n_remain": -1, "n_decoded": 0},
	}
}

func (o *OpenAI) props(w http.ResponseWriter, r *http.Request) {
	llamaOK(w, map[string]any{
		"default_generation_settings": o.slotJSON(0, -1, false),
		"total_slots":                 o.slots,
		"model_path":                  "/models/" + o.alias,
		"chat_template":               "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}",
		"chat_template_caps":          map[string]any{},
		"modalities":                  map[string]any{"vision": false, "audio": false},
		"build_info":                  o.build,
		"is_sleeping":                 false,
	})
}

func (o *OpenAI) getSlots(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	busy := make(map[int]int, len(o.busy))
	for k, v := range o.busy {
		busy[k] = v
	}
	o.mu.Unlock()
	if r.URL.Query().Get("fail_on_no_slot") == "1" && len(busy) >= o.slots {
		llamaError(w, http.StatusServiceUnavailable, "no slot available", "unavailable_error")
		return
	}
	var out []map[string]any
	for i := 0; i < o.slots; i++ {
		task, ok := busy[i]
		if !ok {
			task = -1
		}
		out = append(out, o.slotJSON(i, task, ok))
	}
	llamaOK(w, out)
}

func (o *OpenAI) postSlot(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id_slot"))
	if err != nil || id < 0 || id >= o.slots {
		llamaError(w, http.StatusBadRequest, "Invalid slot ID", "invalid_request_error")
		return
	}
	switch r.URL.Query().Get("action") {
	case "erase":
		llamaOK(w, map[string]any{"id_slot": id, "n_erased": 0})
	case "save", "restore":
		llamaError(w, http.StatusNotImplemented, "This server does not support slots action. Start it with `--slot-save-path`", "not_supported_error")
	default:
		llamaError(w, http.StatusBadRequest, "Invalid action", "invalid_request_error")
	}
}

// metrics is /metrics in Prometheus text format (names from the README).
func (o *OpenAI) metrics(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	prompt, pred, decodes, maxTok, busy := o.promptTok, o.predTok, o.decodes, o.maxTok, len(o.busy)
	o.mu.Unlock()
	type metric struct {
		name, typ, help string
		value           float64
	}
	ms := []metric{
		{"prompt_tokens_total", "counter", "Number of prompt tokens processed.", float64(prompt)},
		{"prompt_seconds_total", "counter", "Prompt process time", float64(prompt) * 0.0015},
		{"tokens_predicted_total", "counter", "Number of generation tokens processed.", float64(pred)},
		{"tokens_predicted_seconds_total", "counter", "Predict process time", float64(pred) * 0.0125},
		{"n_decode_total", "counter", "Total number of llama_decode() calls", float64(decodes)},
		{"n_tokens_max", "counter", "Largest observed n_tokens.", float64(maxTok)},
		{"n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call", 1},
		{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", 666.67},
		{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", 80},
		{"requests_processing", "gauge", "Number of requests processing.", float64(busy)},
		{"requests_deferred", "gauge", "Number of requests deferred.", 0},
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n",
			m.name, m.help, m.name, m.typ, m.name, strconv.FormatFloat(math.Round(m.value*1e6)/1e6, 'f', -1, 64))
	}
	w.Header().Set("Server", "llama.cpp")
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, b.String())
}

// BusySlots lists the slots now processing a request.
func (o *OpenAI) BusySlots() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int
	for s := range o.busy {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}
