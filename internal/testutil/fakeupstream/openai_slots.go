package fakeupstream

// The server's state: /v1/models, /props, /slots and /metrics.

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

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
