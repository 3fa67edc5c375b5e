package fakeupstream

// Pacing generations: Hold, WithRelease, the token delay and cancellation.

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Hold makes every generation that reaches its second piece from now on
// wait until release is called (or its request is cancelled, or the fake
// closes). Generations already waiting on an earlier hold keep waiting for
// that one.
func (s *Server) Hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.gate = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(ch)
			s.mu.Lock()
			if s.gate == ch {
				s.gate = nil
			}
			s.mu.Unlock()
		})
	}
}

// pace is called before piece i (0-based) of a generation. Piece 0 goes
// out at once; before piece 1 the generation waits for WithRelease's
// channel and Hold's gate; before every later piece it waits the token
// delay. It returns false when the generation must stop: the request was
// cancelled (which it records) or the fake is closing.
func (s *Server) pace(r *http.Request, i int) bool {
	return s.paceCtx(r.Context(), stateOf(r), i, nil)
}

// paceCtx is pace for work that is not tied to one request (ComfyUI's
// worker); stop, when not nil, ends the wait like a cancel but is not
// counted as one.
func (s *Server) paceCtx(ctx context.Context, st *reqState, i int, stop <-chan struct{}) bool {
	cancelled := func() bool {
		if st != nil {
			st.cancelled = true
		}
		return false
	}
	if err := ctx.Err(); err != nil {
		return cancelled()
	}
	if i <= 0 {
		return true
	}
	if i == 1 {
		if s.cfg.release != nil {
			select {
			case <-s.cfg.release:
			case <-ctx.Done():
				return cancelled()
			case <-s.done:
				return false
			case <-stop:
				return false
			}
		}
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return cancelled()
			case <-s.done:
				return false
			case <-stop:
				return false
			}
		}
	}
	if s.cfg.delay > 0 {
		tm := time.NewTimer(s.cfg.delay)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return cancelled()
		case <-s.done:
			return false
		case <-stop:
			return false
		}
	}
	return true
}

// markCancelled records that r's client went away mid-answer.
func markCancelled(r *http.Request) {
	if st := stateOf(r); st != nil {
		st.cancelled = true
	}
}

// writeChunk writes p and flushes. A request whose context has already
// ended (checked before writing, so that a client which leaves right after
// the last piece is not counted) or a failed write marks the request
// cancelled and returns false.
func writeChunk(w http.ResponseWriter, r *http.Request, p []byte) bool {
	if r.Context().Err() != nil {
		markCancelled(r)
		return false
	}
	if _, err := w.Write(p); err != nil {
		markCancelled(r)
		return false
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}
