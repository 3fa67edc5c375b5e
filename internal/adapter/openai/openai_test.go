package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/adapter/adaptertest"
)

func TestEveryRow(t *testing.T) {
	a, err := New(adapter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.CheckRoutes(t, a, nil)
}

// TestSpecRoutes pins the classes SPEC section 4 names for OpenAI-compatible
// servers: llama.cpp's /slots, /props and /metrics are management; model
// discovery and health are borrower reads; generation is inference.
func TestSpecRoutes(t *testing.T) {
	a, _ := New(adapter.Options{})
	for _, c := range []struct {
		method, path string
		want         adapter.Class
	}{
		{"GET", "/slots", management},
		{"POST", "/slots/0", management},
		{"GET", "/props", management},
		{"POST", "/props", management},
		{"GET", "/metrics", management},
		{"GET", "/v1/models", read},
		{"GET", "/models", read},
		{"GET", "/health", read},
		{"HEAD", "/health", read},
		{"POST", "/v1/chat/completions", inference},
		{"POST", "/completion", inference},
		{"POST", "/v1/embeddings", inference},
		{"POST", "/v1/audio/transcriptions", inference},
		{"POST", "/models/load", management},
		{"POST", "/sleep", management},
		{"GET", "/", management}, // llama.cpp's web UI: an unlisted read
		{"POST", "/v1/fine_tuning/jobs", adapter.ClassUnknown},
	} {
		d := a.Classify(&adapter.Request{Method: c.method, Path: c.path, Header: http.Header{}})
		if d.Class != c.want {
			t.Errorf("%s %s: %s (%s), want %s", c.method, c.path, d.Class, d.Reason, c.want)
		}
	}
}

func TestModelFromBody(t *testing.T) {
	a, _ := New(adapter.Options{})
	d := a.Classify(&adapter.Request{Method: "POST", Path: "/v1/chat/completions", Body: []byte(`{"model":"qwen3-8b","messages":[]}`)})
	if d.Class != inference || d.Model != "qwen3-8b" || d.RewrittenBody != nil {
		t.Errorf("%s %q %s", d.Class, d.Model, d.RewrittenBody)
	}
	// A body the adapter cannot read is the server's problem, not a refusal.
	d = a.Classify(&adapter.Request{Method: "POST", Path: "/v1/chat/completions", Body: []byte(`{"model":`)})
	if d.Class != inference || d.Malformed {
		t.Errorf("broken body: %s malformed=%v", d.Class, d.Malformed)
	}
}

// TestErrorBodyDecodesLikeOpenAISDK decodes the error body the way the
// official Go SDK does (openai-go internal/requestconfig: the "error" member
// is unwrapped and decoded into apierror.Error, whose code, message, param
// and type are strings) and the way the OpenAI Python SDK and LiteLLM read
// it (body["error"]["message"]).
func TestErrorBodyDecodesLikeOpenAISDK(t *testing.T) {
	a, _ := New(adapter.Options{})
	ct, body := a.ErrorBody("/", 503, "owner_present", "the GPU owner is using the machine")
	if ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var envelope map[string]json.RawMessage
	if err := json.Unmarshal(body, &envelope); err != nil {
		t.Fatal(err)
	}
	inner, ok := envelope["error"]
	if !ok {
		t.Fatalf("no error member in %s", body)
	}
	var apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
		Type    string `json:"type"`
	}
	dec := json.NewDecoder(bytes.NewReader(inner))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&apiError); err != nil {
		t.Fatalf("%s: %v", inner, err)
	}
	if apiError.Message != "the GPU owner is using the machine" || apiError.Type != "owner_present" || apiError.Code != "owner_present" {
		t.Errorf("%+v", apiError)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(inner, &fields)
		if _, ok := fields[k]; !ok {
			t.Errorf("error object lacks %q: %s", k, inner)
		}
	}
}
