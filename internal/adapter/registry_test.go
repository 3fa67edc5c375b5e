package adapter_test

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/adapter/adaptertest"
	_ "github.com/vacancyd/vacancyd/internal/adapter/all"
	"github.com/vacancyd/vacancyd/internal/config"
)

var kinds = []string{config.KindOllama, config.KindOpenAI, config.KindComfyUI, config.KindChatterbox}

// prepare gives every row a body that satisfies the body rules of the kinds
// that read bodies (Ollama): a local model, a prompt, messages and input.
func prepare(rt adapter.Route, r *adapter.Request) {
	if rt.Method != "POST" {
		return
	}
	if strings.HasSuffix(rt.Path, "/transcriptions") || strings.HasSuffix(rt.Path, "/edits") {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Body = []byte("model=llama3.2")
		return
	}
	r.Body = []byte(`{"model":"llama3.2","prompt":"hi","messages":[{"role":"user","content":"hi"}],"input":"hi"}`)
}

// TestEveryKindIsRegistered: each config kind builds through For, with the
// kind it was asked for.
func TestEveryKindIsRegistered(t *testing.T) {
	for _, k := range kinds {
		a, err := adapter.For(k, adapter.Options{})
		if err != nil {
			t.Fatalf("For(%q): %v", k, err)
		}
		if a.Kind() != k {
			t.Errorf("For(%q).Kind() = %q", k, a.Kind())
		}
		if !slices.Contains(adapter.Kinds(), k) {
			t.Errorf("Kinds() lacks %q", k)
		}
	}
	if _, err := adapter.For("triton", adapter.Options{}); err == nil {
		t.Error("unknown kind accepted")
	}
	for _, k := range kinds {
		if _, err := adapter.For(k, adapter.Options{MaxKeepAlive: -1}); err == nil {
			t.Errorf("%s: negative MaxKeepAlive accepted", k)
		}
	}
}

// TestEveryRowOfEveryTable walks every row of every kind (ComfyUI's /api
// twins included) and checks that a request built for the row is given the
// row's own class, pattern and ownership flag.
func TestEveryRowOfEveryTable(t *testing.T) {
	total := 0
	for _, k := range kinds {
		a, err := adapter.For(k, adapter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		adaptertest.CheckRoutes(t, a, prepare)
		total += len(a.Routes())
		t.Logf("%s: %d rows", k, len(a.Routes()))
	}
	if total < 150 {
		t.Errorf("only %d rows in all tables", total)
	}
}

// TestSharedRulesHoldForEveryKind: an unlisted read is management, any
// other unlisted request and any non-canonical path unknown, in every kind.
func TestSharedRulesHoldForEveryKind(t *testing.T) {
	for _, k := range kinds {
		a, _ := adapter.For(k, adapter.Options{})
		for _, c := range []struct {
			method, path string
			want         adapter.Class
		}{
			{"GET", "/vacancyd-unlisted", adapter.ClassManagement},
			{"HEAD", "/vacancyd-unlisted", adapter.ClassManagement},
			{"POST", "/vacancyd-unlisted", adapter.ClassUnknown},
			{"PUT", "/vacancyd-unlisted", adapter.ClassUnknown},
			{"GET", "/a/../b", adapter.ClassUnknown},
			{"POST", "//v1/chat/completions", adapter.ClassUnknown},
		} {
			d := a.Classify(&adapter.Request{Method: c.method, Path: c.path})
			if d.Class != c.want {
				t.Errorf("%s %s %s: %s (%s), want %s", k, c.method, c.path, d.Class, d.Reason, c.want)
			}
		}
		if d := a.Classify(nil); d.Class != adapter.ClassUnknown {
			t.Errorf("%s: nil request classed %s", k, d.Class)
		}
	}
}

// TestRoutesAreCopies: callers cannot edit an adapter's table.
func TestRoutesAreCopies(t *testing.T) {
	for _, k := range kinds {
		a, _ := adapter.For(k, adapter.Options{})
		rs := a.Routes()
		orig := rs[0]
		rs[0].Class, rs[0].Path = adapter.ClassBorrowerRead, "/changed"
		if a.Routes()[0] != orig {
			t.Errorf("%s: Routes returns the live table", k)
		}
	}
}

// TestErrorBodiesAreJSON: every kind renders valid JSON with a JSON content
// type, and the message survives characters that need escaping.
func TestErrorBodiesAreJSON(t *testing.T) {
	msg := `lending paused: "owner" <present> & busy`
	for _, k := range kinds {
		a, _ := adapter.For(k, adapter.Options{})
		ct, body := a.ErrorBody("/", 503, "lending_paused", msg)
		if !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: content type %q", k, ct)
		}
		if !json.Valid(body) {
			t.Errorf("%s: invalid JSON %s", k, body)
		}
		var anyv map[string]any
		if err := json.Unmarshal(body, &anyv); err != nil {
			t.Errorf("%s: %v", k, err)
		}
		if !strings.Contains(decodeAllStrings(anyv), msg) {
			t.Errorf("%s: message lost in %s", k, body)
		}
	}
}

func decodeAllStrings(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			b.WriteString(t)
			b.WriteByte('\n')
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
	return b.String()
}

func TestNewRequestFromHTTP(t *testing.T) {
	hr := httptest.NewRequest("POST", "/api/generate?x=1%202", nil)
	hr.Header.Set("Content-Encoding", "zstd")
	r := adapter.NewRequest(hr, []byte("{}"))
	if r.Method != "POST" || r.Path != "/api/generate" || r.RawQuery != "x=1%202" || r.Header.Get("Content-Encoding") != "zstd" || string(r.Body) != "{}" {
		t.Errorf("%+v", r)
	}
}

// TestClassifyIsSafeConcurrently runs every kind from many goroutines (the
// race detector checks that decisions share no mutable state).
func TestClassifyIsSafeConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for _, k := range kinds {
		a, _ := adapter.For(k, adapter.Options{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, rt := range a.Routes() {
					r := adaptertest.Request(rt)
					prepare(rt, r)
					d := a.Classify(r)
					if d.Params != nil {
						d.Params["mutated"] = "x"
					}
				}
			}()
		}
	}
	wg.Wait()
}
