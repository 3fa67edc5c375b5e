package fakeupstream

// Generation: /v1/chat/completions, /v1/completions and llama.cpp's
// native /completion.

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

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
