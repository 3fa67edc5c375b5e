// Package chatterbox is the adapter for devnen's Chatterbox TTS Server: its
// route table (Routes) and FastAPI's error shape. Classification is by route
// alone.
package chatterbox

import (
	"encoding/json"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() {
	adapter.Register(config.KindChatterbox, func(o adapter.Options) (adapter.Adapter, error) { return New(o) })
}

var table = adapter.MustTable(config.KindChatterbox, Routes)

// Adapter is the Chatterbox adapter.
type Adapter struct{}

// New builds a Chatterbox adapter.
func New(o adapter.Options) (*Adapter, error) {
	if _, err := o.KeepAliveCap(); err != nil {
		return nil, err
	}
	return &Adapter{}, nil
}

// Kind returns config.KindChatterbox.
func (*Adapter) Kind() string { return config.KindChatterbox }

// Routes returns a copy of Routes.
func (*Adapter) Routes() []adapter.Route { return table.Routes() }

// Classify sorts r by the route table.
func (*Adapter) Classify(r *adapter.Request) adapter.Decision { return table.Classify(r) }

// ErrorBody is FastAPI's HTTPException shape, {"detail": "..."}, which the
// server's handlers raise for every error (server.py) and its web UI reads.
func (*Adapter) ErrorBody(_ string, _ int, _ string, message string) (string, []byte) {
	b, _ := json.Marshal(Error{Detail: message})
	return "application/json", b
}

// Error is FastAPI's error response.
type Error struct {
	Detail string `json:"detail"`
}
