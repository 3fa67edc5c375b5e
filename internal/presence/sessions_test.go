package presence

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

func testSessions(timeout time.Duration) (*Sessions, *recSink, *time.Time) {
	sink := newSink()
	s := NewSessions(sink, timeout, nil)
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	return s, sink, &now
}

// A report becomes the account's source, idle time becomes the last input,
// and the report expires after the session timeout.
func TestSessionsReport(t *testing.T) {
	s, sink, now := testSessions(30 * time.Second)
	s.Report("uid:1000", 12.5, "x11", false)
	s.ReportPresence("uid:1000", 0, "x11", true)
	calls := sink.snapshot()
	if len(calls) != 3 {
		t.Fatalf("calls %v", calls)
	}
	name := "session:uid:1000/x11"
	if c := calls[0]; c.kind != "ready" || c.source != name || !c.ready {
		t.Fatalf("first call %v: a new reporter is ready", c)
	}
	if c := calls[1]; c.kind != "activity" || c.source != name ||
		!c.activity.LastInput.Equal(now.Add(-12500*time.Millisecond)) || c.activity.Inhibited || !c.activity.Until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("report %v", c)
	}
	if c := calls[2]; !c.activity.Inhibited || !c.activity.LastInput.Equal(*now) {
		t.Fatalf("inhibited report %v", c)
	}
}

// Idle times too large for a duration, and values that cannot be idle
// times, do not overflow.
func TestSessionsIdleBounds(t *testing.T) {
	s, sink, now := testSessions(time.Minute)
	s.Report("uid:1", 1e300, "a", false)
	s.Report("uid:1", math.NaN(), "a", false)
	calls := sink.snapshot()
	if got := now.Sub(calls[1].activity.LastInput); got != maxIdle {
		t.Fatalf("huge idle became %v", got)
	}
	if !calls[2].activity.LastInput.Equal(*now) {
		t.Fatalf("NaN idle became last input %v", calls[2].activity.LastInput)
	}
}

// One account cannot make unbounded sources: past the bound its longest
// silent source is forgotten. Other accounts are untouched.
func TestSessionsBoundSourcesPerAccount(t *testing.T) {
	s, sink, now := testSessions(time.Minute)
	s.Report("uid:2", 1, "other", false)
	for i := range MaxSessionSources {
		*now = now.Add(time.Second)
		s.Report("uid:1", 1, fmt.Sprintf("s%d", i), false)
	}
	*now = now.Add(time.Second)
	s.Report("uid:1", 1, "s0", false) // known: refreshes, forgets nothing
	*now = now.Add(time.Second)
	from := len(sink.snapshot())
	s.Report("uid:1", 1, "new", false)
	calls := sink.snapshot()[from:]
	if len(calls) != 3 || calls[0].kind != "forget" || calls[0].source != "session:uid:1/s1" {
		t.Fatalf("calls %v: the longest silent source (s1) should be forgotten first", calls)
	}
}

// Reporters silent for ten timeouts (five minutes at least) are forgotten;
// live ones are not.
func TestSessionsForgetSilent(t *testing.T) {
	s, sink, now := testSessions(time.Minute)
	s.Report("uid:1", 0, "x11", false)
	*now = now.Add(9 * time.Minute)
	s.Report("uid:2", 0, "mutter", false)
	*now = now.Add(2 * time.Minute)
	from := len(sink.snapshot())
	s.forgetSilent(*now)
	calls := sink.snapshot()[from:]
	if len(calls) != 1 || calls[0].kind != "forget" || calls[0].source != "session:uid:1/x11" {
		t.Fatalf("calls %v", calls)
	}
	// A forgotten reporter that comes back is new again.
	s.Report("uid:1", 0, "x11", false)
	if c := sink.snapshot()[from+1]; c.kind != "ready" {
		t.Fatalf("returning reporter: %v", c)
	}
	// A changed timeout applies to the reports that follow.
	s.SetTimeout(5 * time.Second)
	s.Report("uid:1", 0, "x11", false)
	if c := sink.snapshot(); !c[len(c)-1].activity.Until.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("until %v", c[len(c)-1].activity.Until)
	}
}

// Run ends with its context.
func TestSessionsRunEnds(t *testing.T) {
	s, _, _ := testSessions(time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
