package presence

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// hang only stops a stuck test from hanging the suite; no test asserts time.
const hang = 60 * time.Second

// call is one call a source made to the sink.
type call struct {
	kind     string // "activity", "pressure", "ready", "forget"
	source   string
	activity lending.Activity
	ready    bool
	reason   string
}

func (c call) String() string {
	switch c.kind {
	case "activity":
		return fmt.Sprintf("activity %s last=%s inhibited=%v until=%s", c.source, c.activity.LastInput.Format(time.StampMicro), c.activity.Inhibited, c.activity.Until.Format(time.StampMicro))
	case "ready":
		return fmt.Sprintf("ready %s %v %q", c.source, c.ready, c.reason)
	}
	return c.kind + " " + c.source
}

// recSink is a lending.Sink that records every call, in order.
type recSink struct {
	mu    sync.Mutex
	calls []call
	more  chan struct{}
}

func newSink() *recSink { return &recSink{more: make(chan struct{}, 1)} }

func (s *recSink) add(c call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

func (s *recSink) ReportActivity(source string, a lending.Activity) {
	s.add(call{kind: "activity", source: source, activity: a})
}

func (s *recSink) ReportPressure(source string, p lending.Pressure) {
	s.add(call{kind: "pressure", source: source})
}

func (s *recSink) SetReady(source string, ready bool, reason string) {
	s.add(call{kind: "ready", source: source, ready: ready, reason: reason})
}

func (s *recSink) Forget(source string) { s.add(call{kind: "forget", source: source}) }

func (s *recSink) snapshot() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// waitFor waits for a call at index from or later that matches, and
// returns it with the index after it.
func (s *recSink) waitFor(t *testing.T, from int, what string, match func(call) bool) (call, int) {
	t.Helper()
	deadline := time.After(hang)
	for {
		calls := s.snapshot()
		for i := from; i < len(calls); i++ {
			if match(calls[i]) {
				return calls[i], i + 1
			}
		}
		select {
		case <-s.more:
		case <-deadline:
			var b strings.Builder
			for _, c := range calls {
				b.WriteString("\n  " + c.String())
			}
			t.Fatalf("no %s within %v; calls:%s", what, hang, b.String())
		}
	}
}

func isActivity(source string) func(call) bool {
	return func(c call) bool { return c.kind == "activity" && c.source == source }
}

func isReady(source string, ready bool) func(call) bool {
	return func(c call) bool { return c.kind == "ready" && c.source == source && c.ready == ready }
}
