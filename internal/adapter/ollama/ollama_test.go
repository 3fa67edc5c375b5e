package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/adapter/adaptertest"
)

func newAdapter(t testing.TB, limit time.Duration) *Adapter {
	t.Helper()
	a, err := New(adapter.Options{MaxKeepAlive: limit})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func post(path, body string) *adapter.Request {
	return &adapter.Request{Method: "POST", Path: path, Header: http.Header{}, Body: []byte(body)}
}

// ollamaDuration decodes keep_alive the way Ollama's api.Duration does
// (ollama api/types.go UnmarshalJSON), written independently here so the
// adapter's reading can be checked against it.
type ollamaDuration struct{ time.Duration }

func (d *ollamaDuration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	d.Duration = 5 * time.Minute
	switch t := v.(type) {
	case float64:
		if t < 0 {
			d.Duration = time.Duration(math.MaxInt64)
		} else {
			d.Duration = time.Duration(int(t) * int(time.Second))
		}
	case string:
		var err error
		if d.Duration, err = time.ParseDuration(t); err != nil {
			return err
		}
		if d.Duration < 0 {
			d.Duration = time.Duration(math.MaxInt64)
		}
	default:
		return fmt.Errorf("unsupported type %T", v)
	}
	return nil
}

// ollamaRequest has the fields of Ollama's GenerateRequest and ChatRequest
// that the body rules depend on, with Ollama's types (messages are left raw:
// Ollama's Message type only adds ways to fail).
type ollamaRequest struct {
	Model     string            `json:"model"`
	Prompt    string            `json:"prompt"`
	Messages  []json.RawMessage `json:"messages"`
	KeepAlive *ollamaDuration   `json:"keep_alive"`
}

// decodeLikeOllama decodes body as gin's ShouldBindJSON does: one value
// from a stream into the struct.
func decodeLikeOllama(body []byte) (ollamaRequest, error) {
	var r ollamaRequest
	err := json.NewDecoder(bytes.NewReader(body)).Decode(&r)
	return r, err
}

func TestEveryRow(t *testing.T) {
	adaptertest.CheckRoutes(t, newAdapter(t, 0), func(rt adapter.Route, r *adapter.Request) {
		if rt.Method != "POST" {
			return
		}
		r.Body = []byte(`{"model":"llama3.2","prompt":"hi","messages":[{"role":"user","content":"hi"}],"input":"hi"}`)
		if rt.Path == "/v1/audio/transcriptions" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Body = []byte("model=whisper")
		}
	})
}

func TestBodyRulesNameRows(t *testing.T) {
	rows := map[string]adapter.Class{}
	for _, r := range Routes {
		rows[r.Method+" "+r.Path] = r.Class
	}
	for key := range bodyRules {
		c, ok := rows[key]
		if !ok {
			t.Errorf("body rule for %q, which is not a row", key)
		} else if c == adapter.ClassManagement {
			t.Errorf("body rule for management row %q would never run", key)
		}
	}
}

func TestClassify(t *testing.T) {
	a := newAdapter(t, 5*time.Minute)
	cases := []struct {
		name      string
		path      string
		body      string
		class     adapter.Class
		malformed bool
		rewritten bool
	}{
		// Unloads: keep_alive 0 in any of Ollama's spellings, nothing to run.
		{"unload number", "/api/generate", `{"model":"m","keep_alive":0}`, management, false, false},
		{"unload string 0", "/api/generate", `{"model":"m","keep_alive":"0"}`, management, false, false},
		{"unload 0s", "/api/generate", `{"model":"m","keep_alive":"0s"}`, management, false, false},
		{"unload 0m", "/api/generate", `{"model":"m","keep_alive":"0m"}`, management, false, false},
		{"unload fraction truncates", "/api/generate", `{"model":"m","keep_alive":0.9}`, management, false, false},
		{"unload empty prompt", "/api/generate", `{"model":"m","prompt":"","keep_alive":0}`, management, false, false},
		{"unload key case", "/api/generate", `{"model":"m","Keep_Alive":0}`, management, false, false},
		{"unload last prompt wins", "/api/generate", `{"model":"m","prompt":"hi","PROMPT":"","keep_alive":0}`, management, false, false},
		{"unload chat no messages", "/api/chat", `{"model":"m","keep_alive":0}`, management, false, false},
		{"unload chat empty messages", "/api/chat", `{"model":"m","messages":[],"keep_alive":"0s"}`, management, false, false},
		{"unload chat null messages", "/api/chat", `{"model":"m","messages":null,"keep_alive":0}`, management, false, false},
		{"unload embed", "/api/embed", `{"model":"m","keep_alive":0}`, management, false, false},
		{"unload embed empty input", "/api/embed", `{"model":"m","input":[""],"keep_alive":0}`, management, false, false},
		{"unload embeddings", "/api/embeddings", `{"model":"m","keep_alive":0}`, management, false, false},
		// keep_alive 0 with work to do runs and then unloads: inference.
		{"zero with prompt", "/api/generate", `{"model":"m","prompt":"hi","keep_alive":0}`, inference, false, false},
		{"null keeps earlier prompt", "/api/generate", `{"model":"m","prompt":"hi","Prompt":null,"keep_alive":0}`, inference, false, false},
		{"zero with messages", "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}],"keep_alive":0}`, inference, false, false},
		{"zero with input", "/api/embed", `{"model":"m","input":["a"],"keep_alive":0}`, inference, false, false},
		{"null keep_alive is not zero", "/api/generate", `{"model":"m","keep_alive":0,"keep_alive":null}`, inference, false, true},
		// A load request (no prompt, no keep_alive) uses the GPU: inference, capped.
		{"load", "/api/generate", `{"model":"m"}`, inference, false, true},

		// Cloud models.
		{"cloud tag", "/api/generate", `{"model":"gpt-oss:120b-cloud","prompt":"hi"}`, management, false, false},
		{"cloud suffix", "/api/chat", `{"model":"qwen3-coder:cloud","messages":[]}`, management, false, false},
		{"cloud case and space", "/api/chat", `{"model":" Kimi-K2:  CLOUD ","messages":[]}`, management, false, false},
		{"cloud bare name", "/api/generate", `{"model":"my-model-cloud","prompt":"hi"}`, management, false, false},
		{"cloud in any duplicate", "/api/generate", `{"model":"x:cloud","Model":"llama3","prompt":"hi"}`, management, false, false},
		{"cloud show model", "/api/show", `{"model":"deepseek-v3.1:671b-cloud"}`, management, false, false},
		{"cloud show name", "/api/show", `{"name":"deepseek-v3.1:cloud"}`, management, false, false},
		{"cloud v1 chat", "/v1/chat/completions", `{"model":"gpt-oss:20b-cloud","messages":[]}`, management, false, false},
		{"cloud v1 embeddings", "/v1/embeddings", `{"model":"x:cloud","input":"a"}`, management, false, false},
		{"cloud anthropic", "/v1/messages", `{"model":"glm-4.6:cloud","max_tokens":1,"messages":[]}`, management, false, false},
		{"not cloud", "/api/show", `{"model":"cloudy:latest"}`, read, false, false},
		{"local suffix", "/api/show", `{"model":"llama3:local"}`, read, false, false},
		{"slash in tag is not cloud", "/api/show", `{"model":"a:b/c-cloudx"}`, read, false, false},

		// Web search tools run on the owner's account.
		{"anthropic web search", "/v1/messages", `{"model":"m","messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, management, false, false},
		{"responses web search", "/v1/responses", `{"model":"m","input":"hi","tools":[{"Type":" web_search_preview"}]}`, management, false, false},
		{"function tool", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"web_search"}]}`, inference, false, false},

		// Malformed bodies are refused, not guessed at.
		{"empty body", "/api/generate", ``, adapter.ClassUnknown, true, false},
		{"not an object", "/api/generate", `["model"]`, adapter.ClassUnknown, true, false},
		{"broken json", "/api/chat", `{"model":"m",`, adapter.ClassUnknown, true, false},
		{"keep_alive no unit", "/api/generate", `{"model":"m","prompt":"hi","keep_alive":"300"}`, adapter.ClassUnknown, true, false},
		{"keep_alive bool", "/api/generate", `{"model":"m","prompt":"hi","keep_alive":true}`, adapter.ClassUnknown, true, false},
		{"model number", "/api/generate", `{"model":5,"prompt":"hi"}`, adapter.ClassUnknown, true, false},
		{"prompt object", "/api/generate", `{"model":"m","prompt":{},"keep_alive":0}`, adapter.ClassUnknown, true, false},
		{"messages string", "/api/chat", `{"model":"m","messages":"hi","keep_alive":0}`, adapter.ClassUnknown, true, false},

		// Only the first JSON value counts, as in gin's ShouldBindJSON.
		{"trailing value ignored", "/api/generate", `{"model":"m","prompt":"","keep_alive":0} {"prompt":"hi"}`, management, false, false},
	}
	for _, c := range cases {
		d := a.Classify(post(c.path, c.body))
		if d.Class != c.class || d.Malformed != c.malformed || (d.RewrittenBody != nil) != c.rewritten {
			t.Errorf("%s: %s %s: got %s malformed=%v rewritten=%v (%s); want %s malformed=%v rewritten=%v",
				c.name, c.path, c.body, d.Class, d.Malformed, d.RewrittenBody != nil, d.Reason, c.class, c.malformed, c.rewritten)
		}
		if d.Class == management && d.RewrittenBody != nil {
			t.Errorf("%s: management decision with a rewritten body", c.name)
		}
	}
}

func TestKeepAliveCap(t *testing.T) {
	a := newAdapter(t, 5*time.Minute)
	for _, c := range []struct {
		in     string // keep_alive JSON, "" for absent
		capped bool
	}{
		{"", true},
		{"null", true},
		{"-1", true},
		{`"-1m"`, true},
		{`"10m"`, true},
		{"301", true},
		{"1e30", true},
		{`"2562047h"`, true},
		{"300", false},
		{"300.9", false},
		{`"5m"`, false},
		{`"4m59s"`, false},
		{`"250ms"`, false},
		{"0", false},
	} {
		body := `{"model":"m","prompt":"hi","options":{"temperature":0.1},"images":["aGk="]`
		if c.in != "" {
			body += `,"keep_alive":` + c.in
		}
		body += "}"
		d := a.Classify(post("/api/generate", body))
		if d.Class != inference {
			t.Fatalf("keep_alive %s: %s (%s)", c.in, d.Class, d.Reason)
		}
		if (d.RewrittenBody != nil) != c.capped {
			t.Errorf("keep_alive %s: rewritten=%v, want %v", c.in, d.RewrittenBody != nil, c.capped)
			continue
		}
		fwd := []byte(body)
		if d.RewrittenBody != nil {
			fwd = d.RewrittenBody
		}
		o, err := decodeLikeOllama(fwd)
		if err != nil {
			t.Fatalf("keep_alive %s: forwarded body %s does not decode: %v", c.in, fwd, err)
		}
		if o.KeepAlive == nil || o.KeepAlive.Duration < 0 || o.KeepAlive.Duration > 5*time.Minute {
			t.Errorf("keep_alive %s: Ollama would keep the model %v", c.in, o.KeepAlive)
		}
		if d.RewrittenBody != nil {
			checkOnlyKeepAliveChanged(t, []byte(body), d.RewrittenBody)
			if o.KeepAlive.Duration != 5*time.Minute {
				t.Errorf("keep_alive %s: capped to %v", c.in, o.KeepAlive.Duration)
			}
		}
	}
}

// checkOnlyKeepAliveChanged decodes both bodies and compares every key but
// keep_alive.
func checkOnlyKeepAliveChanged(t *testing.T, orig, rewritten []byte) {
	t.Helper()
	var a, b map[string]any
	if err := json.Unmarshal(orig, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rewritten, &b); err != nil {
		t.Fatalf("rewritten body %s: %v", rewritten, err)
	}
	for k := range a {
		if strings.EqualFold(k, "keep_alive") {
			delete(a, k)
		}
	}
	if _, ok := b["keep_alive"]; !ok {
		t.Errorf("rewritten body %s has no keep_alive", rewritten)
	}
	delete(b, "keep_alive")
	if !reflect.DeepEqual(a, b) {
		t.Errorf("rewrite changed other fields:\n orig %s\n new  %s", orig, rewritten)
	}
}

func TestRewriteKeepsBytesAndOrder(t *testing.T) {
	a := newAdapter(t, 90*time.Second)
	body := `{ "model" : "m", "prompt":"<b>&amp; é \u00e9", "Keep_Alive":-1, "options":{"num_ctx":4096}, "keep_alive":"1h", "raw":true }`
	d := a.Classify(post("/api/generate", body))
	want := `{"model":"m","prompt":"<b>&amp; é \u00e9","options":{"num_ctx":4096},"raw":true,"keep_alive":"1m30s"}`
	if string(d.RewrittenBody) != want {
		t.Fatalf("rewritten:\n got  %s\n want %s", d.RewrittenBody, want)
	}
	if again := a.Classify(post("/api/generate", want)); again.RewrittenBody != nil || again.Class != inference {
		t.Errorf("rewritten body is rewritten again: %s %s", again.Class, again.RewrittenBody)
	}
}

func TestKeepAliveOnOpenAIRoutes(t *testing.T) {
	a := newAdapter(t, 5*time.Minute)
	for _, c := range []struct {
		keepAlive string
		capped    bool
	}{
		{"", false}, {"null", false}, {`"1m"`, false}, {"60", false},
		{`"1h"`, true}, {"-1", true}, {`"forever"`, true}, {`"1m","KEEP_ALIVE":"2h"`, true}, {`"2h","keep_alive":"1m"`, true},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]`
		if c.keepAlive != "" {
			body += `,"keep_alive":` + c.keepAlive
		}
		body += "}"
		d := a.Classify(post("/v1/chat/completions", body))
		if d.Class != inference || (d.RewrittenBody != nil) != c.capped {
			t.Errorf("%s: %s rewritten=%v (%s), want capped=%v", body, d.Class, d.RewrittenBody != nil, d.Reason, c.capped)
		}
		if d.RewrittenBody != nil {
			checkOnlyKeepAliveChanged(t, []byte(body), d.RewrittenBody)
		}
	}
}

func TestModelReported(t *testing.T) {
	a := newAdapter(t, 0)
	for path, body := range map[string]string{
		"/api/chat":            `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		"/api/show":            `{"name":"llama3.2"}`,
		"/v1/chat/completions": `{"MODEL":"llama3.2","messages":[]}`,
	} {
		if d := a.Classify(post(path, body)); d.Model != "llama3.2" {
			t.Errorf("%s: model %q", path, d.Model)
		}
	}
	d := a.Classify(&adapter.Request{Method: "GET", Path: "/v1/models/llama3.2:8b"})
	if d.Class != read || d.Model != "llama3.2:8b" {
		t.Errorf("GET /v1/models/llama3.2:8b: %s %q", d.Class, d.Model)
	}
	if d := a.Classify(&adapter.Request{Method: "GET", Path: "/v1/models/gpt-oss:120b-cloud"}); d.Class != management {
		t.Errorf("GET /v1/models/<cloud>: %s", d.Class)
	}
}

func multipartBody(t *testing.T, fields map[string]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, _ := w.CreateFormFile("file", "a.wav")
	_, _ = fw.Write([]byte("RIFF...."))
	_ = w.Close()
	return w.FormDataContentType(), buf.Bytes()
}

func TestFormRoutes(t *testing.T) {
	a := newAdapter(t, 0)
	req := func(ct string, body []byte, query string) *adapter.Request {
		r := post("/v1/audio/transcriptions", string(body))
		r.Header.Set("Content-Type", ct)
		r.RawQuery = query
		return r
	}
	ct, local := multipartBody(t, map[string]string{"model": "whisper:large"})
	if d := a.Classify(req(ct, local, "")); d.Class != inference || d.Model != "whisper:large" {
		t.Errorf("local multipart: %s %q (%s)", d.Class, d.Model, d.Reason)
	}
	ct2, cloud := multipartBody(t, map[string]string{"model": "whisper:cloud"})
	if d := a.Classify(req(ct2, cloud, "")); d.Class != management {
		t.Errorf("cloud multipart: %s", d.Class)
	}
	if d := a.Classify(req(ct, local, "model=x%3Acloud")); d.Class != management {
		t.Errorf("cloud model in the query: %s", d.Class)
	}
	if d := a.Classify(req("application/x-www-form-urlencoded", []byte("model=a-cloud"), "")); d.Class != management {
		t.Errorf("cloud urlencoded: %s", d.Class)
	}
	if d := a.Classify(req(ct, local[:len(local)/2], "")); !d.Malformed || d.Class != adapter.ClassUnknown {
		t.Errorf("broken multipart: %s malformed=%v", d.Class, d.Malformed)
	}
	if d := a.Classify(req("multipart/form-data", local, "")); !d.Malformed {
		t.Errorf("multipart without boundary: %s", d.Class)
	}
	if d := a.Classify(req("text/plain", []byte(`{"model":"x:cloud"}`), "")); d.Class != management {
		t.Errorf("JSON image edit with cloud model: %s", d.Class)
	}
}

func TestCompressedBodyIsRefused(t *testing.T) {
	a := newAdapter(t, 0)
	for _, enc := range []string{"zstd", "gzip", "br, identity"} {
		r := post("/v1/chat/completions", `{"model":"m","messages":[]}`)
		r.Header.Set("Content-Encoding", enc)
		if d := a.Classify(r); !d.Malformed || d.Class != adapter.ClassUnknown {
			t.Errorf("Content-Encoding %s: %s", enc, d.Class)
		}
	}
	r := post("/api/generate", `{"model":"m","prompt":"hi","keep_alive":"1m"}`)
	r.Header.Set("Content-Encoding", "identity")
	if d := a.Classify(r); d.Class != inference {
		t.Errorf("identity encoding: %s (%s)", d.Class, d.Reason)
	}
}

func TestRouteOnlyRowsIgnoreBodies(t *testing.T) {
	a := newAdapter(t, 0)
	// Management rows are refused on the route alone, whatever the body.
	if d := a.Classify(post("/api/pull", `not json`)); d.Class != management || d.Malformed {
		t.Errorf("pull: %s malformed=%v", d.Class, d.Malformed)
	}
	if d := a.Classify(&adapter.Request{Method: "GET", Path: "/api/tags", Body: []byte("x")}); d.Class != read {
		t.Errorf("tags: %s", d.Class)
	}
}

func TestIsCloud(t *testing.T) {
	for m, want := range map[string]bool{
		"gpt-oss:120b-cloud": true, "qwen3:cloud": true, "QWEN3:Cloud": true, "x: cloud ": true,
		"ns/model:tag-CLOUD": true, "my-model-cloud": true, "a:cloud:local": false,
		"llama3.2": false, "cloud": false, "cloudy:latest": false, "a:b/c-cloudx": false, "": false,
	} {
		if got := isCloud(m); got != want {
			t.Errorf("isCloud(%q) = %v, want %v", m, got, want)
		}
	}
}

func TestParseKeepAliveMatchesOllama(t *testing.T) {
	for _, raw := range []string{
		"0", "0.5", "1", "299.99", "300", "-0.5", "-1", "1e9", "9e9", `"0"`, `"0s"`, `"-0s"`, `"5m"`,
		`"1h30m"`, `"-5m"`, `"1.5h"`, `"300"`, `"abc"`, `true`, `{}`, `[]`,
	} {
		var od ollamaDuration
		oerr := json.Unmarshal([]byte(raw), &od)
		k, err := parseKeepAlive(json.RawMessage(raw))
		if (oerr == nil) != (err == nil) {
			t.Errorf("%s: Ollama error %v, ours %v", raw, oerr, err)
			continue
		}
		if err != nil {
			continue
		}
		if k.zero() != (od.Duration == 0) {
			t.Errorf("%s: zero=%v, Ollama %v", raw, k.zero(), od.Duration)
		}
		limit := 5 * time.Minute
		if k.exceeds(limit) != (od.Duration > limit || od.Duration < 0) {
			t.Errorf("%s: exceeds=%v, Ollama %v", raw, k.exceeds(limit), od.Duration)
		}
	}
	// Past about 9.2e9 seconds Ollama's int arithmetic overflows and the
	// result depends on the platform (0, an unload, on amd64). The adapter
	// counts such numbers as over the cap, so they are replaced by the cap.
	for _, raw := range []string{"9.3e9", "1e30", "1.7e308"} {
		k, err := parseKeepAlive(json.RawMessage(raw))
		if err != nil || k.zero() || !k.exceeds(5*time.Minute) {
			t.Errorf("%s: zero=%v exceeds=%v err=%v", raw, k.zero(), k.exceeds(5*time.Minute), err)
		}
	}
}

// TestErrorBodyDecodesLikeOllamaClient: Ollama's Go client decodes error
// answers into api.StatusError, whose message field is tagged "error".
func TestErrorBodyDecodesLikeOllamaClient(t *testing.T) {
	ct, body := newAdapter(t, 0).ErrorBody("/", 403, "management_denied", "model management is not lent")
	if !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content type %q", ct)
	}
	var statusError struct {
		ErrorMessage string `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&statusError); err != nil || statusError.ErrorMessage != "model management is not lent" {
		t.Errorf("%s: %+v %v", body, statusError, err)
	}
}

// TestSpecRoutes pins SPEC section 4 for Ollama: pulling, creating, copying,
// pushing and deleting models, /api/ps and web search/fetch are management;
// model discovery and health are borrower reads.
func TestSpecRoutes(t *testing.T) {
	a := newAdapter(t, 0)
	for _, c := range []struct {
		method, path string
		want         adapter.Class
	}{
		{"POST", "/api/pull", management},
		{"POST", "/api/create", management},
		{"POST", "/api/copy", management},
		{"POST", "/api/push", management},
		{"DELETE", "/api/delete", management},
		{"POST", "/api/blobs/sha256:abc", management},
		{"HEAD", "/api/blobs/sha256:abc", management},
		{"GET", "/api/ps", management},
		{"POST", "/api/experimental/web_search", management},
		{"POST", "/api/experimental/web_fetch", management},
		{"POST", "/api/web_search", management},
		{"POST", "/api/me", management},
		{"GET", "/api/tags", read},
		{"HEAD", "/api/tags", read},
		{"GET", "/api/version", read},
		{"GET", "/", read},
		{"HEAD", "/", read},
		{"GET", "/v1/models", read},
		{"POST", "/api/tokenize", adapter.ClassUnknown},
	} {
		d := a.Classify(&adapter.Request{Method: c.method, Path: c.path, Header: http.Header{}, Body: []byte(`{"model":"m"}`)})
		if d.Class != c.want {
			t.Errorf("%s %s: %s (%s), want %s", c.method, c.path, d.Class, d.Reason, c.want)
		}
	}
}

// On Ollama's OpenAI-compatible /v1 routes the gate answers in OpenAI's
// error shape, as Ollama's own /v1 routes do, so OpenAI SDKs decode it.
func TestErrorBodyOnV1IsOpenAIShape(t *testing.T) {
	_, body := newAdapter(t, 0).ErrorBody("/v1/chat/completions", 503, "lending_paused", "the owner has paused lending")
	var e struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "lending_paused" || e.Error.Message == "" {
		t.Fatalf("%s: %+v %v", body, e, err)
	}
}
