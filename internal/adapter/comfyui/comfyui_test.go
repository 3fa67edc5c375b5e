package comfyui

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

// TestEveryRouteAlsoUnderAPI: ComfyUI registers each route twice (as is and
// under /api), so each prefixed row must have a twin with the same class.
func TestEveryRouteAlsoUnderAPI(t *testing.T) {
	rows := map[string]adapter.Route{}
	for _, r := range Routes {
		rows[r.Method+" "+r.Path] = r
	}
	for _, r := range prefixed {
		twin, ok := rows[r.Method+" /api"+r.Path]
		if !ok {
			t.Errorf("%s has no /api twin", r)
			continue
		}
		if twin.Class != r.Class || twin.OwnResults != r.OwnResults {
			t.Errorf("%s: twin %s is %s own=%v", r, twin, twin.Class, twin.OwnResults)
		}
	}
	if len(Routes) != 2*len(prefixed)+len(unprefixed) {
		t.Errorf("Routes has %d rows, want %d", len(Routes), 2*len(prefixed)+len(unprefixed))
	}
}

// TestSpecRoutes pins SPEC section 4 for ComfyUI: uploads, settings, the
// queue, the full history, workflows and logs are management; a client's
// own results (one prompt's history, outputs, the event socket) are
// borrower reads the gate restricts to the borrower; queuing is inference.
func TestSpecRoutes(t *testing.T) {
	a, _ := New(adapter.Options{})
	for _, prefix := range []string{"", "/api"} {
		for _, c := range []struct {
			method, path string
			want         adapter.Class
			own          bool
		}{
			{"POST", "/upload/image", management, false},
			{"POST", "/upload/mask", management, false},
			{"GET", "/settings", management, false},
			{"POST", "/settings/Comfy.Theme", management, false},
			{"GET", "/queue", management, false},
			{"POST", "/queue", management, false},
			{"GET", "/history", management, false},
			{"POST", "/history", management, false},
			{"GET", "/userdata", management, false},
			{"GET", "/userdata/workflows/my flow.json", management, false},
			{"POST", "/userdata/workflows/a.json/move/workflows/b.json", management, false},
			{"POST", "/interrupt", management, false},
			{"POST", "/free", management, false},
			{"GET", "/system_stats", management, false},
			{"GET", "/history/5e7c5a0b-2a4e-4c1d-8a47-1f1b0c4b5d6e", read, true},
			{"GET", "/view", read, true},
			{"GET", "/ws", read, true},
			{"GET", "/object_info", read, false},
			{"GET", "/models/checkpoints", read, false},
			{"POST", "/prompt", inference, false},
			{"GET", "/prompt", management, false},
		} {
			d := a.Classify(&adapter.Request{Method: c.method, Path: prefix + c.path, Header: http.Header{}})
			if d.Class != c.want || d.OwnResults != c.own {
				t.Errorf("%s %s%s: %s own=%v (%s), want %s own=%v", c.method, prefix, c.path, d.Class, d.OwnResults, d.Reason, c.want, c.own)
			}
		}
	}
	for _, p := range []string{"/internal/logs", "/internal/logs/raw", "/internal/folder_paths", "/api/assets"} {
		if d := a.Classify(&adapter.Request{Method: "GET", Path: p}); d.Class != management {
			t.Errorf("GET %s: %s", p, d.Class)
		}
	}
	if d := a.Classify(&adapter.Request{Method: "PATCH", Path: "/internal/logs/subscribe"}); d.Class != management {
		t.Errorf("PATCH /internal/logs/subscribe: %s", d.Class)
	}
	d := a.Classify(&adapter.Request{Method: "GET", Path: "/api/history/abc"})
	if d.Params["prompt_id"] != "abc" {
		t.Errorf("prompt id param: %v", d.Params)
	}
	// ComfyUI-Manager and other custom-node routes are not borrower routes.
	if d := a.Classify(&adapter.Request{Method: "POST", Path: "/customnode/install"}); d.Class != adapter.ClassUnknown {
		t.Errorf("custom node install: %s", d.Class)
	}
}

// TestErrorBodyDecodesLikeComfyUIClients: the frontend and API clients read
// a refused prompt as {"error": {"type", "message", "details",
// "extra_info"}, "node_errors": {...}} (server.py post_prompt).
func TestErrorBodyDecodesLikeComfyUIClients(t *testing.T) {
	a, _ := New(adapter.Options{})
	ct, body := a.ErrorBody("/", 503, "lending_paused", "lending is paused")
	if ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var resp struct {
		Error struct {
			Type      string         `json:"type"`
			Message   string         `json:"message"`
			Details   string         `json:"details"`
			ExtraInfo map[string]any `json:"extra_info"`
		} `json:"error"`
		NodeErrors map[string]any `json:"node_errors"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if resp.Error.Type != "lending_paused" || resp.Error.Message != "lending is paused" || resp.NodeErrors == nil || resp.Error.ExtraInfo == nil {
		t.Errorf("%s", body)
	}
}
