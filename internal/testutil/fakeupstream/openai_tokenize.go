package fakeupstream

// llama.cpp's text routes: /tokenize, /detokenize and /apply-template.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

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
