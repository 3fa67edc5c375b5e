// Package ollama is the adapter for Ollama: its route table (Routes) and
// the body rules that find management hidden in inference requests.
//
// Body rules, applied to the rows listed in bodyRules:
//
//   - A cloud model (a name whose tag is "cloud" or ends in "-cloud", e.g.
//     "gpt-oss:120b-cloud", or any name ending in ":cloud" or "-cloud") is
//     management: Ollama proxies it to ollama.com on the owner's account.
//     This covers the "model" (and, for /api/show, "name") key of JSON
//     bodies, the {model} of GET /v1/models/{model}, and the form and query
//     "model" of the multipart routes.
//   - keep_alive 0 without a prompt (/api/generate, /api/embeddings), without
//     messages (/api/chat) or without input (/api/embed) is an unload:
//     management.
//   - A "tools" entry whose type starts with "web_search" on /v1/messages or
//     /v1/responses is management: Ollama runs that search on the owner's
//     ollama.com account.
//   - keep_alive is capped at Options.MaxKeepAlive. On the native routes
//     (/api/generate, /api/chat, /api/embed, /api/embeddings) a keep_alive
//     that is absent or null is set to the cap, so the server's own default
//     (OLLAMA_KEEP_ALIVE, which the owner may have set to forever) never
//     applies to borrowed work; one that is longer, negative (forever) or a
//     number of seconds over the cap is replaced by the cap, written as a
//     duration string. On the OpenAI and Anthropic routes, which Ollama's
//     compatibility layer does not read keep_alive from today, a keep_alive
//     that is present and not a duration within the cap is replaced; an
//     absent one is left absent.
//
// keep_alive is read exactly as Ollama reads it (see keepAlive), and keys
// are matched as encoding/json matches them into Ollama's request structs:
// case-insensitively, last duplicate wins. Bodies are parsed whatever their
// Content-Type, as Ollama does; a body with a Content-Encoding, or one that
// does not parse, is refused as malformed rather than guessed at.
//
// A local model whose manifest points at a remote host is also served
// remotely by Ollama; recognising those needs the model list, which the
// observation interface of a later issue provides.
package ollama

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/adapter/openai"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() {
	adapter.Register(config.KindOllama, func(o adapter.Options) (adapter.Adapter, error) { return New(o) })
}

var table = adapter.MustTable(config.KindOllama, Routes)

// Adapter is the Ollama adapter.
type Adapter struct {
	keepAliveCap time.Duration
}

// New builds an Ollama adapter.
func New(o adapter.Options) (*Adapter, error) {
	limit, err := o.KeepAliveCap()
	if err != nil {
		return nil, err
	}
	return &Adapter{keepAliveCap: limit}, nil
}

// Kind returns config.KindOllama.
func (*Adapter) Kind() string { return config.KindOllama }

// Routes returns a copy of Routes.
func (*Adapter) Routes() []adapter.Route { return table.Routes() }

// ErrorBody renders {"error": message}, the shape Ollama's handlers write
// (gin.H{"error": ...}) and its Go client decodes into api.StatusError. On
// the OpenAI-compatible /v1 routes Ollama answers in OpenAI's shape (its
// openai middleware), which OpenAI's SDKs decode, so the gate does too.
func (*Adapter) ErrorBody(path string, status int, errType, message string) (string, []byte) {
	if strings.HasPrefix(path, "/v1/") {
		return openaiShape.ErrorBody(path, status, errType, message)
	}
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{message})
	return "application/json; charset=utf-8", b
}

// Classify sorts r by the route table, then applies the body rules.
func (a *Adapter) Classify(r *adapter.Request) adapter.Decision {
	if r == nil {
		return adapter.Decision{Class: adapter.ClassUnknown, Reason: "no request"}
	}
	d := table.Lookup(r.Method, r.Path)
	if d.Class == adapter.ClassUnknown || d.Class == adapter.ClassManagement {
		return d
	}
	if d.Pattern == "/v1/models/{model}" {
		d.Model = d.Params["model"]
		if isCloud(d.Model) {
			return asManagement(d, "cloud model "+quote(d.Model)+" runs on the owner's ollama.com account")
		}
		return d
	}
	rl := bodyRules[r.Method+" "+d.Pattern]
	if rl == ruleNone {
		return d
	}
	if enc := strings.TrimSpace(r.Header.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
		return malformed(d, "Content-Encoding "+quote(enc)+" is not accepted on this route")
	}
	if rl == ruleV1Form {
		return a.formRoute(d, r)
	}
	ms, err := members(r.Body)
	if err != nil {
		return malformed(d, "body: "+err.Error())
	}
	return a.jsonRoute(d, rl, ms)
}

func (a *Adapter) jsonRoute(d adapter.Decision, rl rule, ms []member) adapter.Decision {
	models := field(ms, "model")
	if rl == ruleShow {
		models = append(models, field(ms, "name")...)
	}
	for _, m := range stringValues(models) {
		if isCloud(m) {
			return asManagement(d, "cloud model "+quote(m)+" runs on the owner's ollama.com account")
		}
	}
	model, err := effectiveString(field(ms, "model"))
	if err != nil {
		return malformed(d, "model: "+err.Error())
	}
	if model == "" && rl == ruleShow {
		if model, err = effectiveString(field(ms, "name")); err != nil {
			return malformed(d, "name: "+err.Error())
		}
	}
	d.Model = model

	switch rl {
	case ruleShow:
		return d
	case ruleV1:
		if webSearchTool(ms) {
			return asManagement(d, "web_search tool runs on the owner's ollama.com account")
		}
		return a.capV1(d, ms)
	}
	return a.native(d, rl, ms)
}

// native applies the unload rule and the keep_alive cap of /api/generate,
// /api/chat, /api/embed and /api/embeddings.
func (a *Adapter) native(d adapter.Decision, rl rule, ms []member) adapter.Decision {
	ka, set, err := effectiveKeepAlive(field(ms, "keep_alive"))
	if err != nil {
		return malformed(d, err.Error())
	}
	if set && ka.zero() {
		var empty bool
		switch rl {
		case ruleGenerate, ruleEmbeddings:
			prompt, err := effectiveString(field(ms, "prompt"))
			if err != nil {
				return malformed(d, "prompt: "+err.Error())
			}
			empty = prompt == ""
		case ruleChat:
			n, err := effectiveLen(field(ms, "messages"))
			if err != nil {
				return malformed(d, "messages: "+err.Error())
			}
			empty = n == 0
		case ruleEmbed:
			empty = !hasInput(field(ms, "input"))
		}
		if empty {
			return asManagement(d, "unload: keep_alive 0 with nothing to run")
		}
	}
	if set && !ka.exceeds(a.keepAliveCap) {
		return d
	}
	d.RewrittenBody = rebuild(ms, capValue(a.keepAliveCap))
	if set {
		d.Reason += "; keep_alive capped at " + a.keepAliveCap.String()
	} else {
		d.Reason += "; keep_alive set to the cap " + a.keepAliveCap.String()
	}
	return d
}

// capV1 caps a keep_alive present on an OpenAI or Anthropic route.
func (a *Adapter) capV1(d adapter.Decision, ms []member) adapter.Decision {
	vs := field(ms, "keep_alive")
	if len(vs) == 0 {
		return d
	}
	ka, set, err := effectiveKeepAlive(vs)
	if err == nil && (!set || !ka.exceeds(a.keepAliveCap)) && allWithin(vs, a.keepAliveCap) {
		return d
	}
	d.RewrittenBody = rebuild(ms, capValue(a.keepAliveCap))
	d.Reason += "; keep_alive capped at " + a.keepAliveCap.String()
	return d
}

// allWithin reports whether every keep_alive value is null or a duration
// within limit, so no reader of any duplicate sees a longer one.
func allWithin(vs []json.RawMessage, limit time.Duration) bool {
	for _, v := range vs {
		if isNull(v) {
			continue
		}
		k, err := parseKeepAlive(v)
		if err != nil || k.exceeds(limit) {
			return false
		}
	}
	return true
}

// formRoute handles the routes that take multipart or URL-encoded bodies
// as well as JSON: only the cloud rule applies there.
func (a *Adapter) formRoute(d adapter.Decision, r *adapter.Request) adapter.Decision {
	models, isForm, err := formModels(r.Header.Get("Content-Type"), r.Body, r.RawQuery)
	if err != nil {
		return malformed(d, err.Error())
	}
	if !isForm {
		ms, err := members(r.Body)
		if err != nil {
			return malformed(d, "body: "+err.Error())
		}
		models = append(models, stringValues(field(ms, "model"))...)
	}
	for _, m := range models {
		if isCloud(m) {
			return asManagement(d, "cloud model "+quote(m)+" runs on the owner's ollama.com account")
		}
	}
	if len(models) > 0 {
		d.Model = models[len(models)-1]
	}
	return d
}

// isCloud reports whether Ollama sends requests for model to ollama.com.
// It mirrors parseSourceSuffix in ollama internal/modelref/modelref.go (the
// text after the last ':' is "cloud", or ends in "-cloud" without a '/',
// ignoring case and surrounding space) and also counts any name ending in
// ":cloud" or "-cloud".
func isCloud(model string) bool {
	m := strings.TrimSpace(model)
	if i := strings.LastIndex(m, ":"); i >= 0 {
		suffix := strings.ToLower(strings.TrimSpace(m[i+1:]))
		if suffix == "cloud" || (!strings.Contains(suffix, "/") && strings.HasSuffix(suffix, "-cloud")) {
			return true
		}
	}
	lower := strings.ToLower(m)
	return strings.HasSuffix(lower, ":cloud") || strings.HasSuffix(lower, "-cloud")
}

func asManagement(d adapter.Decision, why string) adapter.Decision {
	d.Class = adapter.ClassManagement
	d.Reason = why
	d.RewrittenBody = nil
	return d
}

func malformed(d adapter.Decision, why string) adapter.Decision {
	d.Class = adapter.ClassUnknown
	d.Malformed = true
	d.Reason = "malformed request: " + why
	d.RewrittenBody = nil
	return d
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// openaiShape renders errors on Ollama's /v1 routes.
var openaiShape openai.Adapter

// StreamError is the last line of a cut NDJSON stream: {"error": message},
// which Ollama's client returns as an error. Other streams (the OpenAI
// compatible SSE) get nothing.
func (*Adapter) StreamError(contentType, _ string, message string) []byte {
	if !strings.HasPrefix(contentType, "application/x-ndjson") {
		return nil
	}
	b, _ := json.Marshal(map[string]string{"error": message})
	return append(b, '\n')
}
