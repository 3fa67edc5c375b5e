package fakeupstream

// The wrapper around every fake's handler: recording, credentials and the
// response writer that notices a client going away.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
)

// reqState is what the wrapper and the handlers share about one request.
type reqState struct {
	rec       *Recorded
	cancelled bool
	hijacked  bool
}

type stateKey struct{}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// serve records the request, checks the credential and dispatches.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Done()

	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))

	rec := &Recorded{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Query:    r.URL.Query(),
		Header:   r.Header.Clone(),
		Body:     body,
	}
	st := &reqState{rec: rec}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.active++
	s.notifyLocked()
	s.mu.Unlock()

	sw := &statusWriter{ResponseWriter: w, st: st}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	defer func() {
		s.mu.Lock()
		if st.hijacked {
			rec.Status = http.StatusSwitchingProtocols
		} else {
			rec.Status = sw.status
			if rec.Status == 0 {
				rec.Status = http.StatusOK
			}
		}
		rec.Done = true
		rec.Cancelled = st.cancelled
		if st.cancelled {
			s.cancelled++
			select {
			case s.cancelCh <- copyRecorded(rec):
			default:
			}
		}
		s.active--
		s.notifyLocked()
		s.mu.Unlock()
	}()

	if !s.authorized(r) {
		s.unauth(sw, r)
		return
	}
	s.handler.ServeHTTP(sw, r)
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.bearer == "" && !s.cfg.basic {
		return true
	}
	if s.public != nil && s.public(r) {
		return true
	}
	if s.cfg.bearer != "" {
		got := r.Header.Get("Authorization")
		if s.Kind == KindOpenAI && got == "" {
			// llama.cpp retries with the Anthropic header.
			got = r.Header.Get("X-Api-Key")
		}
		got = strings.TrimPrefix(got, "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.bearer)) == 1 {
			return true
		}
	}
	if s.cfg.basic {
		u, p, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(s.cfg.basicUser)) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg.basicPass)) == 1 {
			return true
		}
	}
	return false
}

// challenge sets WWW-Authenticate for the configured credential.
func (s *Server) challenge(w http.ResponseWriter) {
	if s.cfg.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+string(s.Kind)+`"`)
	} else {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
}

// statusWriter remembers the status and marks the request cancelled when a
// write fails because the client went away.
type statusWriter struct {
	http.ResponseWriter
	st     *reqState
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack lets a WebSocket take the connection over.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("fakeupstream: connection cannot be hijacked")
	}
	c, brw, err := h.Hijack()
	if err == nil {
		w.st.hijacked = true
	}
	return c, brw, err
}

// Unwrap serves http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
