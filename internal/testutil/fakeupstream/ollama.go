package fakeupstream

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ollama's content types: gin's c.JSON and the NDJSON stream.
const (
	ctJSON   = "application/json; charset=utf-8"
	ctNDJSON = "application/x-ndjson"
)

// DefaultOllamaModels are the models an Ollama fake has without WithModels.
var DefaultOllamaModels = []string{"llama3.2:latest", "nomic-embed-text:latest"}

// Ollama fakes an Ollama server (ollama/ollama v0.17.4).
type Ollama struct {
	*Server

	mu     sync.Mutex
	models map[string]*ollamaModel
	loaded map[string]*loadedModel
	blobs  map[string]bool
}

type ollamaModel struct {
	name     string
	family   string
	params   string
	quant    string
	size     int64
	digest   string
	embed    bool
	modified time.Time
	ctxLen   int
}

type loadedModel struct {
	name    string
	keep    time.Duration
	forever bool
	expires time.Time
	refs    int
}

// LoadedModel is a model in the fake's /api/ps table.
type LoadedModel struct {
	Name string
	// KeepAlive is the session duration the last request set (0 for a
	// model being unloaded as soon as its requests end).
	KeepAlive time.Duration
	// Forever is true for a negative keep_alive.
	Forever bool
	// ExpiresAt is when the model unloads (far in the future when Forever).
	ExpiresAt time.Time
	// Busy is how many requests are using the model now.
	Busy int
}

// StartOllama starts an Ollama fake on a loopback port.
func StartOllama(t testing.TB, opts ...Option) *Ollama {
	t.Helper()
	o := &Ollama{
		Server: newServer(KindOllama, opts),
		models: map[string]*ollamaModel{},
		loaded: map[string]*loadedModel{},
		blobs:  map[string]bool{},
	}
	if o.cfg.version == "" {
		o.cfg.version = "0.17.4"
	}
	names := o.cfg.models
	if len(names) == 0 {
		names = DefaultOllamaModels
	}
	base := time.Now().Add(-time.Hour).UTC()
	for i, n := range names {
		o.addModel(n, base.Add(-time.Duration(i)*time.Minute))
	}
	o.unauth = func(w http.ResponseWriter, r *http.Request) {
		o.challenge(w)
		writeJSON(w, http.StatusUnauthorized, ctJSON, map[string]string{"error": "unauthorized"})
	}
	o.handler = o.routes()
	o.listen(t)
	return o
}

// ollamaName is the name as Ollama lists it: a tag is added when missing.
func ollamaName(n string) string {
	n = strings.TrimSpace(n)
	if n == "" {
		return ""
	}
	last := n[strings.LastIndex(n, "/")+1:]
	if !strings.Contains(last, ":") {
		n += ":latest"
	}
	return n
}

func (o *Ollama) addModel(name string, modified time.Time) *ollamaModel {
	name = ollamaName(name)
	sum := sha256.Sum256([]byte(name))
	m := &ollamaModel{
		name:     name,
		family:   "llama",
		params:   "3.2B",
		quant:    "Q4_K_M",
		size:     2019393189,
		digest:   hex.EncodeToString(sum[:]),
		modified: modified,
		ctxLen:   4096,
	}
	if strings.Contains(name, "embed") {
		m.embed, m.family, m.params, m.quant, m.size, m.ctxLen = true, "nomic-bert", "137M", "F16", 274302450, 2048
	}
	o.mu.Lock()
	o.models[name] = m
	o.mu.Unlock()
	return m
}

func (o *Ollama) model(name string) (*ollamaModel, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.models[ollamaName(name)]
	return m, ok
}

// Models lists the models the fake has (as /api/tags names them).
func (o *Ollama) Models() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for n := range o.models {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Loaded returns the fake's /api/ps table (expired models dropped).
func (o *Ollama) Loaded() []LoadedModel {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expireLocked()
	var out []LoadedModel
	for _, l := range o.loaded {
		out = append(out, LoadedModel{Name: l.name, KeepAlive: l.keep, Forever: l.forever, ExpiresAt: l.expires, Busy: l.refs})
	}
	slices.SortFunc(out, func(a, b LoadedModel) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// keepAlive is a parsed keep_alive (api.Duration semantics).
type keepAlive struct {
	set     bool
	d       time.Duration
	forever bool
}

// parseKeepAlive follows api.Duration.UnmarshalJSON: a number is seconds,
// a string is a Go duration, a negative value is forever.
func parseKeepAlive(raw json.RawMessage) (keepAlive, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return keepAlive{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return keepAlive{}, err
	}
	ka := keepAlive{set: true}
	switch t := v.(type) {
	case float64:
		if t < 0 {
			ka.forever = true
		} else {
			ka.d = time.Duration(t * float64(time.Second))
		}
	case string:
		d, err := time.ParseDuration(t)
		if err != nil {
			return keepAlive{}, err
		}
		if d < 0 {
			ka.forever = true
		} else {
			ka.d = d
		}
	default:
		//lint:ignore ST1005 api.Duration's own message, verbatim
		return keepAlive{}, fmt.Errorf("Unsupported type: '%s'", reflect.TypeOf(v))
	}
	return ka, nil
}

func (o *Ollama) session(ka keepAlive) keepAlive {
	if !ka.set {
		return keepAlive{set: true, d: o.cfg.keepAlive}
	}
	return ka
}

func expiry(now time.Time, ka keepAlive) time.Time {
	if ka.forever {
		// time.Time.Add saturates, as in Ollama's scheduler.
		return now.Add(time.Duration(math.MaxInt64))
	}
	return now.Add(ka.d)
}

// acquire loads name for a request (Ollama's scheduler: the request's
// keep_alive, or the default, becomes the model's session duration).
func (o *Ollama) acquire(name string, ka keepAlive) {
	ka = o.session(ka)
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		l = &loadedModel{name: name}
		o.loaded[name] = l
	}
	l.refs++
	l.keep, l.forever = ka.d, ka.forever
	l.expires = expiry(time.Now(), ka)
}

// release ends a request's use of name: with no request left, a session
// of 0 unloads the model and any other restarts its expiry timer.
func (o *Ollama) release(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		return
	}
	if l.refs > 0 {
		l.refs--
	}
	if l.refs > 0 {
		return
	}
	if !l.forever && l.keep <= 0 {
		delete(o.loaded, name)
		return
	}
	l.expires = expiry(time.Now(), keepAlive{d: l.keep, forever: l.forever})
}

// unload is expireRunner: the model goes at once when idle.
func (o *Ollama) unload(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		return
	}
	if l.refs == 0 {
		delete(o.loaded, name)
		return
	}
	l.keep, l.forever, l.expires = 0, false, time.Now()
}

func (o *Ollama) expireLocked() {
	now := time.Now()
	for n, l := range o.loaded {
		if l.refs == 0 && !l.forever && !l.expires.After(now) {
			delete(o.loaded, n)
		}
	}
}

func (o *Ollama) routes() http.Handler {
	rt := &router{
		notFound: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "404 page not found")
		},
		notAllowed: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = io.WriteString(w, "405 method not allowed")
		},
	}
	running := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Ollama is running")
	}
	version := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ctJSON, map[string]string{"version": o.cfg.version})
	}
	rt.handle("HEAD", "/", running)
	rt.handle("GET", "/", running)
	rt.handle("HEAD", "/api/version", version)
	rt.handle("GET", "/api/version", version)
	rt.handle("GET", "/api/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ctJSON, map[string]any{"cloud": map[string]any{"disabled": false, "source": "default"}})
	})
	rt.handle("POST", "/api/pull", o.pull)
	rt.handle("POST", "/api/push", o.push)
	rt.handle("HEAD", "/api/tags", o.tags)
	rt.handle("GET", "/api/tags", o.tags)
	rt.handle("POST", "/api/show", o.show)
	rt.handle("DELETE", "/api/delete", o.delete)
	rt.handle("POST", "/api/create", o.create)
	rt.handle("POST", "/api/blobs/{digest}", o.postBlob)
	rt.handle("HEAD", "/api/blobs/{digest}", o.headBlob)
	rt.handle("POST", "/api/copy", o.copyModel)
	rt.handle("GET", "/api/ps", o.ps)
	rt.handle("POST", "/api/generate", o.generate)
	rt.handle("POST", "/api/chat", o.chat)
	rt.handle("POST", "/api/embed", o.embed)
	rt.handle("POST", "/api/embeddings", o.embeddings)
	rt.handle("POST", "/v1/chat/completions", o.v1Chat)
	rt.handle("POST", "/v1/completions", o.v1Completions)
	rt.handle("POST", "/v1/embeddings", o.v1Embeddings)
	rt.handle("GET", "/v1/models", o.v1Models)
	rt.handle("GET", "/v1/models/{model}", o.v1Model)
	return rt
}

func ollamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ctJSON, map[string]string{"error": msg})
}

// bindJSON is gin's ShouldBindJSON with Ollama's handling of its errors.
func bindJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, _ := io.ReadAll(r.Body)
	if len(bytes.TrimSpace(body)) == 0 {
		ollamaError(w, http.StatusBadRequest, "missing request body")
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func nowUTC() time.Time { return time.Now().UTC() }

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
	ka, err := parseKeepAlive(req.KeepAlive)
	if err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	m, ok := o.model(req.Model)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
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
	if req.Stream != nil && !*req.Stream {
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
		if !writeNDJSON(w, r, generateResponse{Model: req.Model, CreatedAt: nowUTC(), Response: Token(i)}) {
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
	ka, err := parseKeepAlive(req.KeepAlive)
	if err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	if strings.TrimSpace(req.Model) == "" {
		ollamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := o.model(req.Model)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
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
	if req.Stream != nil && !*req.Stream {
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
		if !writeNDJSON(w, r, chatResponse{Model: req.Model, CreatedAt: nowUTC(), Message: ollamaMessage{Role: "assistant", Content: Token(i)}}) {
			return
		}
	}
	writeNDJSON(w, r, final(""))
}

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
	ka, err := parseKeepAlive(req.KeepAlive)
	if err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	input, ok := embedInputs(req.Input)
	if !ok {
		ollamaError(w, http.StatusBadRequest, "invalid input type")
		return
	}
	m, ok := o.model(req.Model)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
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
	ka, err := parseKeepAlive(req.KeepAlive)
	if err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return
	}
	if strings.TrimSpace(req.Model) == "" {
		ollamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := o.model(req.Model)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
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

type modelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func (m *ollamaModel) details() modelDetails {
	return modelDetails{Format: "gguf", Family: m.family, Families: []string{m.family}, ParameterSize: m.params, QuantizationLevel: m.quant}
}

func (o *Ollama) tags(w http.ResponseWriter, r *http.Request) {
	type listModel struct {
		Name       string       `json:"name"`
		Model      string       `json:"model"`
		ModifiedAt time.Time    `json:"modified_at"`
		Size       int64        `json:"size"`
		Digest     string       `json:"digest"`
		Details    modelDetails `json:"details"`
	}
	o.mu.Lock()
	models := []listModel{}
	for _, m := range o.models {
		models = append(models, listModel{Name: m.name, Model: m.name, ModifiedAt: m.modified, Size: m.size, Digest: m.digest, Details: m.details()})
	}
	o.mu.Unlock()
	// Most recently modified first, as ListHandler sorts.
	slices.SortStableFunc(models, func(a, b listModel) int {
		return cmp.Or(b.ModifiedAt.Compare(a.ModifiedAt), cmp.Compare(a.Name, b.Name))
	})
	writeJSON(w, http.StatusOK, ctJSON, map[string]any{"models": models})
}

func (o *Ollama) showResponse(m *ollamaModel) map[string]any {
	caps := []string{"completion"}
	info := map[string]any{
		"general.architecture":       m.family,
		"general.parameter_count":    3212749888,
		"general.file_type":          15,
		m.family + ".context_length": m.ctxLen,
	}
	tmpl := "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n"
	params := "stop                           \"<|start_header_id|>\"\nstop                           \"<|end_header_id|>\"\nstop                           \"<|eot_id|>\""
	if m.embed {
		caps = []string{"embedding"}
		info["general.parameter_count"] = 136727040
		tmpl, params = "{{ .Prompt }}", "num_ctx                        8192"
	}
	return map[string]any{
		"license":      "LLAMA 3.2 COMMUNITY LICENSE AGREEMENT",
		"modelfile":    "# Modelfile generated by \"ollama show\"\nFROM " + m.name + "\nTEMPLATE \"\"\"" + tmpl + "\"\"\"\n",
		"parameters":   params,
		"template":     tmpl,
		"details":      m.details(),
		"model_info":   info,
		"capabilities": caps,
		"modified_at":  m.modified,
	}
}

func (o *Ollama) show(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if !bindJSON(w, r, &req) {
		return
	}
	name := cmp.Or(req.Model, req.Name)
	if name == "" {
		ollamaError(w, http.StatusBadRequest, "model is required")
		return
	}
	m, ok := o.model(name)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	writeJSON(w, http.StatusOK, ctJSON, o.showResponse(m))
}

func (o *Ollama) ps(w http.ResponseWriter, r *http.Request) {
	type processModel struct {
		Name          string       `json:"name"`
		Model         string       `json:"model"`
		Size          int64        `json:"size"`
		Digest        string       `json:"digest"`
		Details       modelDetails `json:"details"`
		ExpiresAt     time.Time    `json:"expires_at"`
		SizeVRAM      int64        `json:"size_vram"`
		ContextLength int          `json:"context_length"`
	}
	o.mu.Lock()
	o.expireLocked()
	models := []processModel{}
	for _, l := range o.loaded {
		m := o.models[l.name]
		if m == nil {
			continue
		}
		size := m.size + 400<<20
		models = append(models, processModel{Name: m.name, Model: m.name, Size: size, Digest: m.digest,
			Details: m.details(), ExpiresAt: l.expires, SizeVRAM: size, ContextLength: m.ctxLen})
	}
	o.mu.Unlock()
	// Longest time left first, as PsHandler sorts.
	slices.SortStableFunc(models, func(a, b processModel) int {
		return cmp.Or(b.ExpiresAt.Compare(a.ExpiresAt), cmp.Compare(a.Name, b.Name))
	})
	writeJSON(w, http.StatusOK, ctJSON, map[string]any{"models": models})
}

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
	m, ok := o.model(req.Model)
	if !ok {
		if strings.TrimSpace(req.Model) == "" {
			ollamaV1Error(w, http.StatusBadRequest, true, "model is required")
			return
		}
		ollamaV1Error(w, http.StatusNotFound, true, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	if m.embed {
		ollamaV1Error(w, http.StatusBadRequest, true, fmt.Sprintf("%q does not support chat", req.Model))
		return
	}
	o.acquire(m.name, keepAlive{})
	defer o.release(m.name)
	limit := 0
	if req.MaxTokens != nil {
		limit = *req.MaxTokens
	}
	n, cut := o.genCount(limit)
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
	m, ok := o.model(req.Model)
	if !ok {
		ollamaV1Error(w, http.StatusNotFound, true, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	if m.embed {
		ollamaV1Error(w, http.StatusBadRequest, true, fmt.Sprintf("%q does not support generate", req.Model))
		return
	}
	o.acquire(m.name, keepAlive{})
	defer o.release(m.name)
	limit := 0
	if req.MaxTokens != nil {
		limit = *req.MaxTokens
	}
	n, cut := o.genCount(limit)
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
	m, ok := o.model(req.Model)
	if !ok {
		ollamaV1Error(w, http.StatusNotFound, true, fmt.Sprintf("model '%s' not found", req.Model))
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
	m, ok := o.model(name)
	if !ok {
		ollamaV1Error(w, http.StatusNotFound, true, fmt.Sprintf("model '%s' not found", name))
		return
	}
	writeJSON(w, http.StatusOK, "application/json", ollamaV1Model{ID: name, Object: "model", Created: m.modified.Unix(), OwnedBy: ownedBy(name)})
}
