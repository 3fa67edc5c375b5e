package chatterbox

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

// TestSpecRoutes pins SPEC section 4 for Chatterbox: speech is inference,
// /status, settings, uploads and model swaps are management.
func TestSpecRoutes(t *testing.T) {
	a, _ := New(adapter.Options{})
	for _, c := range []struct {
		method, path string
		want         adapter.Class
	}{
		{"POST", "/tts", inference},
		{"POST", "/v1/audio/speech", inference},
		{"GET", "/api/model-info", read},
		{"GET", "/get_predefined_voices", read},
		{"GET", "/status", management},
		{"POST", "/save_settings", management},
		{"POST", "/restart_server", management},
		{"POST", "/api/unload", management},
		{"POST", "/upload_reference", management},
		{"GET", "/outputs/tts_output_1.wav", management},
		{"GET", "/docs", management},
		{"POST", "/tts/", adapter.ClassUnknown},
		{"DELETE", "/tts", adapter.ClassUnknown},
	} {
		d := a.Classify(&adapter.Request{Method: c.method, Path: c.path, Header: http.Header{}})
		if d.Class != c.want {
			t.Errorf("%s %s: %s (%s), want %s", c.method, c.path, d.Class, d.Reason, c.want)
		}
	}
}

// TestErrorBodyIsFastAPIShape: FastAPI answers HTTPException with
// {"detail": "..."}, which the server's own UI and clients read.
func TestErrorBodyIsFastAPIShape(t *testing.T) {
	a, _ := New(adapter.Options{})
	ct, body := a.ErrorBody("/", 403, "management_denied", "settings are not lent")
	if ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var resp struct {
		Detail string `json:"detail"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil || resp.Detail != "settings are not lent" {
		t.Errorf("%s: %v", body, err)
	}
}
