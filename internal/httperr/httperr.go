// Package httperr is vacancyd's one error type at the HTTP boundary: Msg and
// Type go to the client as JSON, Err only to the log.
package httperr

import (
	"encoding/json"
	"log/slog"
	"net/http"
)

// Error is an HTTP error answer.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Type is a stable machine-readable reason, e.g. "missing_intent".
	Type string
	// Msg is a human-readable explanation for the client.
	Msg string
	// Scope, when set, is the scope the request needed (never which tokens exist).
	Scope string
	// Header holds extra response headers (WWW-Authenticate, Retry-After).
	Header http.Header
	// Err is the internal cause, logged and never sent.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Type + ": " + e.Msg + ": " + e.Err.Error()
	}
	return e.Type + ": " + e.Msg
}

// Body is the JSON shape of every vacancyd error answer on the API listener:
// {"error": {"type": "...", "message": "...", "required_scope": "..."}}.
type Body struct {
	Error BodyError `json:"error"`
}

// BodyError is Body's inner object.
type BodyError struct {
	Type          string `json:"type"`
	Message       string `json:"message"`
	RequiredScope string `json:"required_scope,omitempty"`
}

// Write sends e as JSON. A nil logger logs nothing.
func Write(w http.ResponseWriter, e *Error, log *slog.Logger) {
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(Body{Error: BodyError{Type: e.Type, Message: e.Msg, RequiredScope: e.Scope}})
	if log != nil && e.Err != nil {
		log.Warn("request failed", "status", e.Status, "type", e.Type, "err", e.Err)
	}
}
