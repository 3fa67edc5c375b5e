// Package openai is the adapter for OpenAI-compatible servers (llama.cpp's
// llama-server, vLLM and others): its route table (Routes) and the OpenAI
// error shape. Classification is by route alone.
package openai

import (
	"encoding/json"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() {
	adapter.Register(config.KindOpenAI, func(o adapter.Options) (adapter.Adapter, error) { return New(o) })
}

var table = adapter.MustTable(config.KindOpenAI, Routes)

// Adapter is the OpenAI-compatible adapter.
type Adapter struct{}

// New builds an OpenAI-compatible adapter.
func New(o adapter.Options) (*Adapter, error) {
	if _, err := o.KeepAliveCap(); err != nil {
		return nil, err
	}
	return &Adapter{}, nil
}

// Kind returns config.KindOpenAI.
func (*Adapter) Kind() string { return config.KindOpenAI }

// Routes returns a copy of Routes.
func (*Adapter) Routes() []adapter.Route { return table.Routes() }

// Classify sorts r by the route table. Model is filled, best effort, from
// the "model" of a JSON body.
func (*Adapter) Classify(r *adapter.Request) adapter.Decision {
	d := table.Classify(r)
	if d.Class == adapter.ClassInference && len(r.Body) > 0 && r.Body[0] == '{' {
		var m struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(r.Body, &m) == nil {
			d.Model = m.Model
		}
	}
	return d
}

// ErrorBody is the shape the OpenAI API answers with and its SDKs decode:
// {"error": {"message", "type", "param", "code"}}. The official Go SDK
// (openai-go internal/requestconfig) unwraps the "error" member and reads
// the four fields as strings, so code carries errType (OpenAI's own codes
// are strings such as "rate_limit_exceeded"), not the number llama.cpp and
// vLLM put there.
func (*Adapter) ErrorBody(_ string, _ int, errType, message string) (string, []byte) {
	b, _ := json.Marshal(Error{Error: ErrorObject{Message: message, Type: errType, Code: errType}})
	return "application/json", b
}

// Error is the OpenAI error envelope.
type Error struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the object inside Error.
type ErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}
