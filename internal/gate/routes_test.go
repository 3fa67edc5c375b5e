package gate_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/adapter/adaptertest"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// walkBody is the body sent on a row that takes one: enough for the
// adapter's body rules to class the request by its route (a prompt, so
// that an Ollama keep_alive rule never turns it into an unload).
func walkBody(kind string, rt adapter.Route) (body []byte, contentType string) {
	var v any
	switch kind {
	case config.KindOllama:
		if rt.Path == "/v1/audio/transcriptions" {
			return []byte("model=whisper"), "application/x-www-form-urlencoded"
		}
		v = map[string]any{"model": "llama3.2", "prompt": "hi", "input": "hi", "stream": false,
			"messages": []map[string]string{{"role": "user", "content": "hi"}}}
		if rt.Class == adapter.ClassManagement {
			v = map[string]any{"model": "walk-model", "name": "walk-model", "stream": false}
		}
	case config.KindOpenAI:
		v = map[string]any{"model": "m", "prompt": "hi", "input": "hi", "content": "hi",
			"messages": []map[string]string{{"role": "user", "content": "hi"}}}
	case config.KindComfyUI:
		v = map[string]any{}
		if strings.HasSuffix(rt.Path, "/prompt") {
			v = map[string]any{"prompt": fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "walk"), "client_id": "walk"}
		}
	case config.KindChatterbox:
		v = map[string]any{"text": "hello", "input": "hello", "voice": "Emily.wav"}
	}
	b, _ := json.Marshal(v)
	return b, "application/json"
}

// unknownRequests are requests no row of kind's table admits: methods a
// route does not take, paths no server serves, paths that are not
// canonical.
var unknownRequests = map[string][][2]string{
	config.KindOllama:     {{"DELETE", "/api/chat"}, {"PUT", "/api/generate"}, {"POST", "/api/nothing"}, {"POST", "/api//chat"}, {"PATCH", "/v1/models"}, {"POST", "/api/chat/"}},
	config.KindOpenAI:     {{"DELETE", "/v1/chat/completions"}, {"POST", "/v2/nothing"}, {"PUT", "/slots"}, {"POST", "/v1/../v1/chat/completions"}},
	config.KindComfyUI:    {{"DELETE", "/prompt"}, {"PUT", "/api/prompt"}, {"POST", "/api/nothing"}, {"POST", "/ws"}},
	config.KindChatterbox: {{"DELETE", "/tts"}, {"POST", "/tts/"}, {"PUT", "/v1/audio/speech"}, {"POST", "/nothing"}},
}

// TestEveryRouteThroughGate walks every row of every adapter's route table
// through a gate in front of the matching fake upstream, once with
// management = "deny" and once with "allow": inference and borrower reads
// reach the upstream on both; management is refused (403
// management_denied, counted, in the upstream's error shape) on the first
// and reaches the upstream on the second; a ComfyUI own-results read of a
// prompt nobody queued is refused (refused_not_owner); requests no row
// admits are refused (refused_route). Nothing refused reaches the fake, and
// no forwarded request carries the borrower's token.
func TestEveryRouteThroughGate(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			fake := fakeupstream.Start(t, fakeupstream.Kind(kind))
			deny := startGate(t, gateConfig{kind: kind, target: fake.URL})
			allow := startGate(t, gateConfig{kind: kind, target: fake.URL, management: "allow"})
			ad, err := adapter.For(kind, adapter.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := &walker{t: t, kind: kind, fake: fake}
			rows := ad.Routes()
			if len(rows) == 0 {
				t.Fatal("empty route table")
			}
			for i, rt := range rows {
				methods := []string{rt.Method}
				if rt.Method == "GET" {
					methods = append(methods, "HEAD")
				}
				for _, m := range methods {
					r := req{method: m, path: adaptertest.ExamplePath(rt.Path), token: aliceToken, apiKey: i%2 == 1}
					if m != "GET" && m != "HEAD" {
						body, ct := walkBody(kind, rt)
						r.body, r.header = body, http.Header{"Content-Type": {ct}}
					}
					what := rt.String() + " as " + m + " " + r.path
					switch {
					case rt.OwnResults && !strings.HasSuffix(rt.Path, "/ws"):
						w.refused(deny, r, what, http.StatusNotFound, gate.OutcomeNotOwner, "refused_not_owner")
						w.refused(allow, r, what, http.StatusNotFound, gate.OutcomeNotOwner, "refused_not_owner")
					case rt.Class == adapter.ClassManagement:
						w.refused(deny, r, what, http.StatusForbidden, gate.OutcomeManagement, "management_denied")
						w.reaches(allow, r, what)
					default:
						w.reaches(deny, r, what)
						w.reaches(allow, r, what)
					}
				}
			}
			// A read the table does not list is management, not unknown.
			unlisted := req{method: "GET", path: "/not-a-listed-read", token: aliceToken}
			w.refused(deny, unlisted, "unlisted GET", http.StatusForbidden, gate.OutcomeManagement, "management_denied")
			w.reaches(allow, unlisted, "unlisted GET")
			for _, u := range unknownRequests[kind] {
				r := req{method: u[0], path: u[1], token: aliceToken, body: []byte(`{"model":"llama3.2","prompt":"hi"}`)}
				w.refused(deny, r, "unknown "+u[0]+" "+u[1], http.StatusNotFound, gate.OutcomeRoute, "refused_route")
				w.refused(allow, r, "unknown "+u[0]+" "+u[1], http.StatusNotFound, gate.OutcomeRoute, "refused_route")
			}
			t.Logf("%s: %d rows walked, %d requests reached the fake", kind, len(rows), fake.Count())
		})
	}
}

type walker struct {
	t    *testing.T
	kind string
	fake *fakeupstream.Server
}

// reaches sends r and checks that exactly that request reached the fake,
// without the borrower's token.
func (w *walker) reaches(e *gateEnv, r req, what string) {
	t := w.t
	t.Helper()
	before := w.fake.Count()
	admitted := e.counter(t, gate.OutcomeAdmitted)
	res := e.do(t, r)
	if w.fake.Count() != before+1 {
		t.Errorf("%s: %d requests reached the fake, want 1 (answer %d %s)", what, w.fake.Count()-before, res.status, res.body)
		return
	}
	got, _ := w.fake.Last()
	if got.Method != r.method || got.Path != r.path {
		t.Errorf("%s: the fake got %s %s", what, got.Method, got.Path)
	}
	if got.Header.Get("Authorization") != "" || got.Header.Get("X-Api-Key") != "" {
		t.Errorf("%s: the borrower's token reached the upstream: %v", what, got.Header)
	}
	if res.status == http.StatusForbidden || res.header.Get("Retry-After") != "" {
		t.Errorf("%s: forwarded, yet answered like a refusal: %d %s", what, res.status, res.body)
	}
	e.waitCounter(t, gate.OutcomeAdmitted, admitted+1)
}

// refused sends r and checks the refusal: its status, the error in the
// upstream's shape, the counter, and that nothing reached the fake.
func (w *walker) refused(e *gateEnv, r req, what string, status int, outcome, errType string) {
	t := w.t
	t.Helper()
	before := w.fake.Count()
	n := e.counter(t, outcome)
	res := e.do(t, r)
	if res.status != status {
		t.Errorf("%s: status %d (%s), want %d", what, res.status, res.body, status)
	}
	if c := w.fake.Count(); c != before {
		got, _ := w.fake.Last()
		t.Errorf("%s: refused, yet %d request(s) reached the fake (last %s %s)", what, c-before, got.Method, got.Path)
	}
	if r.method != "HEAD" {
		msg := errorMessage(t, errorShapeOf(w.kind, r.path), res.body, errType)
		if msg == "" {
			t.Errorf("%s: empty message", what)
		}
	}
	e.waitCounter(t, outcome, n+1)
}
