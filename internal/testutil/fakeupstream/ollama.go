package fakeupstream

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
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
