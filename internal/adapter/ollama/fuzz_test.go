package ollama

import (
	"bytes"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
)

var fuzzPaths = []string{
	"/api/generate", "/api/chat", "/api/embed", "/api/embeddings", "/api/show",
	"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/images/edits",
}

// FuzzClassifyBody runs the body rules on arbitrary bodies and checks:
//   - no panic, a valid class;
//   - a management, unknown or malformed decision never carries a rewritten body;
//   - a rewritten body is classified the same way again and not rewritten twice;
//   - whenever a native request is forwarded and Ollama itself would accept
//     the original body, Ollama reads the forwarded body with a keep_alive
//     between 0 and the cap, the same model and prompt, no cloud model, and
//     not as an unload;
//   - on the OpenAI routes every keep_alive left in a forwarded body is
//     within the cap.
func FuzzClassifyBody(f *testing.F) {
	for _, b := range []string{
		`{"model":"m","prompt":"hi"}`,
		`{"model":"m","keep_alive":0}`,
		`{"model":"m","prompt":"","keep_alive":"0s"}`,
		`{"model":"m","messages":[],"keep_alive":-1}`,
		`{"model":"m","prompt":"hi","keep_alive":"10m","Keep_Alive":5}`,
		`{"model":"x:cloud","prompt":"hi"}`,
		`{"name":"y-cloud"}`,
		`{"model":"m","tools":[{"type":"web_search"}]}`,
		`{"model":"m","input":["a",""],"keep_alive":1e30}`,
		`{"model":"m","prompt":"a","prompt":null,"keep_alive":0.2}`,
		`{"model":"m"} trailing`,
		`[]`, ``, `{`, `null`,
	} {
		for i := range fuzzPaths {
			f.Add(uint8(i), b)
		}
	}
	limit := 5 * time.Minute
	a, err := New(adapter.Options{MaxKeepAlive: limit})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := fuzzPaths[int(route)%len(fuzzPaths)]
		d := a.Classify(post(path, body))
		if !d.Class.Valid() {
			t.Fatalf("invalid class %d", d.Class)
		}
		if d.RewrittenBody != nil && d.Class != adapter.ClassInference && d.Class != adapter.ClassBorrowerRead {
			t.Fatalf("%s decision carries a rewritten body", d.Class)
		}
		if d.Malformed && d.Class != adapter.ClassUnknown {
			t.Fatalf("malformed but %s", d.Class)
		}
		forwarded := d.Class == adapter.ClassInference || d.Class == adapter.ClassBorrowerRead
		if !forwarded {
			return
		}
		fwd := []byte(body)
		if d.RewrittenBody != nil {
			fwd = d.RewrittenBody
			again := a.Classify(post(path, string(fwd)))
			if again.Class != d.Class || again.RewrittenBody != nil {
				t.Fatalf("rewritten body %s classed %s, rewritten again: %s", fwd, again.Class, again.RewrittenBody)
			}
		}
		switch bodyRules["POST "+path] {
		case ruleGenerate, ruleChat, ruleEmbed, ruleEmbeddings:
			orig, err := decodeLikeOllama([]byte(body))
			if err != nil {
				return // Ollama answers 400 and runs nothing
			}
			got, err := decodeLikeOllama(fwd)
			if err != nil {
				t.Fatalf("forwarded body %s does not decode: %v", fwd, err)
			}
			if got.KeepAlive == nil || got.KeepAlive.Duration < 0 || got.KeepAlive.Duration > limit {
				t.Fatalf("forwarded body %s keeps the model %v", fwd, got.KeepAlive)
			}
			if got.Model != orig.Model || got.Prompt != orig.Prompt || len(got.Messages) != len(orig.Messages) {
				t.Fatalf("forwarded body %s changed the request %s", fwd, body)
			}
			if isCloud(got.Model) {
				t.Fatalf("cloud model %q forwarded", got.Model)
			}
			if got.KeepAlive.Duration == 0 {
				unload := (path == "/api/generate" || path == "/api/embeddings") && got.Prompt == "" ||
					path == "/api/chat" && len(got.Messages) == 0
				if unload {
					t.Fatalf("unload forwarded: %s", fwd)
				}
			}
		case ruleV1:
			ms, err := members(fwd)
			if err != nil {
				return
			}
			for _, v := range field(ms, "keep_alive") {
				if isNull(v) {
					continue
				}
				k, err := parseKeepAlive(v)
				if err != nil || k.exceeds(limit) {
					t.Fatalf("forwarded keep_alive %s (err %v) in %s", v, err, fwd)
				}
			}
			for _, m := range stringValues(field(ms, "model")) {
				if isCloud(m) {
					t.Fatalf("cloud model %q forwarded", m)
				}
			}
			if bytes.Contains(bytes.ToLower(fwd), []byte("web_search")) && webSearchTool(ms) {
				t.Fatalf("web search tool forwarded: %s", fwd)
			}
		}
	})
}
