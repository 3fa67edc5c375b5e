// Package comfyui is the adapter for ComfyUI: its route table (Routes),
// every route of which also exists under an /api prefix, and ComfyUI's
// error shape. Classification is by route alone; the rows that serve a
// client's own results (history of one prompt, output files, the event
// WebSocket) carry OwnResults, and the gate restricts them to the prompts
// a borrower queued through it.
package comfyui

import (
	"encoding/json"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() {
	adapter.Register(config.KindComfyUI, func(o adapter.Options) (adapter.Adapter, error) { return New(o) })
}

var table = adapter.MustTable(config.KindComfyUI, Routes)

// Adapter is the ComfyUI adapter.
type Adapter struct{}

// New builds a ComfyUI adapter.
func New(o adapter.Options) (*Adapter, error) {
	if _, err := o.KeepAliveCap(); err != nil {
		return nil, err
	}
	return &Adapter{}, nil
}

// Kind returns config.KindComfyUI.
func (*Adapter) Kind() string { return config.KindComfyUI }

// Routes returns a copy of Routes.
func (*Adapter) Routes() []adapter.Route { return table.Routes() }

// Classify sorts r by the route table.
func (*Adapter) Classify(r *adapter.Request) adapter.Decision { return table.Classify(r) }

// ErrorBody uses the shape ComfyUI's POST /prompt answers a rejected prompt
// with (server.py post_prompt):
//
//	{"error": {"type", "message", "details", "extra_info"}, "node_errors": {}}
//
// ComfyUI's other routes answer errors with a bare status or plain text, so
// this is the one JSON error shape its clients parse; the frontend shows
// error.message (or error.details).
func (*Adapter) ErrorBody(_ string, _ int, errType, message string) (string, []byte) {
	b, _ := json.Marshal(Error{
		Error:      ErrorObject{Type: errType, Message: message, Details: message, ExtraInfo: map[string]any{}},
		NodeErrors: map[string]any{},
	})
	return "application/json", b
}

// Error is ComfyUI's prompt error response.
type Error struct {
	Error      ErrorObject    `json:"error"`
	NodeErrors map[string]any `json:"node_errors"`
}

// ErrorObject is the object inside Error.
type ErrorObject struct {
	Type      string         `json:"type"`
	Message   string         `json:"message"`
	Details   string         `json:"details"`
	ExtraInfo map[string]any `json:"extra_info"`
}
