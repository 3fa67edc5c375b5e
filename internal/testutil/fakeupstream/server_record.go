package fakeupstream

// What a fake recorded, and waiting for it.

import (
	"context"
	"net/url"
)

// Requests returns a copy of every request recorded so far, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = copyRecorded(r)
	}
	return out
}

// RequestsTo returns the recorded requests whose path is path.
func (s *Server) RequestsTo(path string) []Recorded {
	var out []Recorded
	for _, r := range s.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Last returns the most recent request, and false when there is none.
func (s *Server) Last() (Recorded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return Recorded{}, false
	}
	return copyRecorded(s.reqs[len(s.reqs)-1]), true
}

// Count is how many requests reached the fake.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Reset forgets the recorded requests and the cancellation count. It does
// not touch a fake's own state (loaded models, queue, history).
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.cancelled = 0
	s.mu.Unlock()
	for {
		select {
		case <-s.cancelCh:
		default:
			return
		}
	}
}

// Cancelled is how many requests the fake saw cancelled mid-answer.
func (s *Server) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Cancellations delivers each request the fake saw cancelled, as it happens
// (buffered; a test that does not read it loses nothing else).
func (s *Server) Cancellations() <-chan Recorded { return s.cancelCh }

// InFlight is how many requests are being answered now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// WaitCancelled waits until at least n requests were seen cancelled, or ctx
// ends.
func (s *Server) WaitCancelled(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return s.cancelled >= n })
}

// WaitRequests waits until at least n requests were recorded, or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return len(s.reqs) >= n })
}

// WaitIdle waits until no request is in flight, or ctx ends. An open
// WebSocket (ComfyUI's /ws) counts as in flight until it closes.
func (s *Server) WaitIdle(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.active == 0 })
}

// waitFor waits until cond (called with s.mu held) is true.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes waiters; s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func copyRecorded(r *Recorded) Recorded {
	c := *r
	c.Header = r.Header.Clone()
	c.Query = cloneValues(r.Query)
	c.Body = append([]byte(nil), r.Body...)
	return c
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
