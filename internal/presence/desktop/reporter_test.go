package desktop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
)

// hang only stops a stuck test from hanging the suite; no test asserts time.
const hang = 60 * time.Second

// The planner sends the first reading, inhibition changes, input after an
// interval of believed idleness at once; everything else once per interval.
func TestPlanner(t *testing.T) {
	t0 := time.Unix(5000, 0)
	p := planner{interval: 5 * time.Second}
	if due, _ := p.due(t0, time.Minute, false); !due {
		t.Fatal("first reading not due")
	}
	p.record(t0, time.Minute, false)
	for _, tc := range []struct {
		name      string
		after     time.Duration
		idle      time.Duration
		inhibited bool
		due       bool
	}{
		{"idle growing, within the interval", time.Second, time.Minute + time.Second, false, false},
		{"the interval is up", 5 * time.Second, time.Minute + 5*time.Second, false, true},
		{"inhibition began", time.Second, time.Minute + time.Second, true, true},
		{"input after a minute idle", time.Second, 200 * time.Millisecond, false, true},
		{"idle jitter within the tolerance", time.Second, time.Minute + 500*time.Millisecond, false, false},
		{"clock went back", -time.Second, time.Minute, false, true},
	} {
		if due, why := p.due(t0.Add(tc.after), tc.idle, tc.inhibited); due != tc.due {
			t.Errorf("%s: due=%v (%s), want %v", tc.name, due, why, tc.due)
		}
	}
	// Input while the service already believes the owner active waits for
	// the interval: reporting every key would gain nothing.
	p.record(t0, 0, false)
	if due, why := p.due(t0.Add(3*time.Second), 100*time.Millisecond, false); due {
		t.Errorf("input soon after an active report sent at once (%s)", why)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 100: 30 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// fakeSource is an idle source the test drives.
type fakeSource struct {
	name     string
	mu       sync.Mutex
	idle     time.Duration
	err      error
	reads    int
	closed   bool
	activity chan struct{}
}

func (f *fakeSource) Name() string { return f.name }
func (f *fakeSource) Idle(context.Context) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.idle, f.err
}
func (f *fakeSource) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}
func (f *fakeSource) set(idle time.Duration, err error) {
	f.mu.Lock()
	f.idle, f.err = idle, err
	f.mu.Unlock()
}
func (f *fakeSource) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// notifyingSource is a fakeSource whose desktop signals input.
type notifyingSource struct{ *fakeSource }

func (n notifyingSource) Activity() <-chan struct{} { return n.activity }

func candidate(src IdleSource, openErr *error) Candidate {
	return Candidate{Name: src.Name(), Open: func(context.Context) (IdleSource, error) {
		if openErr != nil && *openErr != nil {
			return nil, *openErr
		}
		return src, nil
	}}
}

// Select takes the first candidate that opens and answers, closes the ones
// that opened but did not answer, and says why each failed when none works.
func TestSelect(t *testing.T) {
	noBus := errors.New("no session bus")
	a := &fakeSource{name: "a"}
	b := &fakeSource{name: "b", err: errors.New("ServiceUnknown")}
	c := &fakeSource{name: "c"}
	d := &fakeSource{name: "d"}
	got, err := Select(context.Background(), []Candidate{candidate(a, &noBus), candidate(b, nil), candidate(c, nil), candidate(d, nil)})
	if err != nil || got != c {
		t.Fatalf("selected %v, %v; want c", got, err)
	}
	if !b.isClosed() || c.isClosed() || d.reads != 0 {
		t.Fatalf("b closed %v, c closed %v, d read %d times", b.isClosed(), c.isClosed(), d.reads)
	}
	_, err = Select(context.Background(), []Candidate{candidate(a, &noBus), candidate(b, nil)})
	if err == nil || !strings.Contains(err.Error(), "a: no session bus; b: ServiceUnknown") {
		t.Fatalf("error %v", err)
	}
	if _, err := Select(context.Background(), nil); err == nil {
		t.Fatal("no candidates: no error")
	}
}

// fakeSender records reports; it fails while fail is above zero.
type fakeSender struct {
	mu      sync.Mutex
	reports []Report
	fail    int
	tries   int
	more    chan struct{}
}

func newSender() *fakeSender { return &fakeSender{more: make(chan struct{}, 1)} }

func (s *fakeSender) Send(_ context.Context, r Report) error {
	s.mu.Lock()
	defer func() {
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
	}()
	s.tries++
	if s.fail > 0 {
		s.fail--
		return fmt.Errorf("adminsock: %w", errors.New("no service is listening on the admin socket"))
	}
	s.reports = append(s.reports, r)
	return nil
}

// waitFor waits for a report at index from or later that matches.
func (s *fakeSender) waitFor(t *testing.T, from int, what string, match func(Report) bool) (Report, int) {
	t.Helper()
	deadline := time.After(hang)
	for {
		s.mu.Lock()
		reports := append([]Report(nil), s.reports...)
		s.mu.Unlock()
		for i := from; i < len(reports); i++ {
			if match(reports[i]) {
				return reports[i], i + 1
			}
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("no %s within %v; reports: %+v", what, hang, reports)
		}
	}
}

func anyReport(Report) bool { return true }

// fakeChecker is an inhibitor checker the test drives.
type fakeChecker struct {
	name string
	mu   sync.Mutex
	on   bool
	err  error
}

func (c *fakeChecker) Name() string { return c.name }
func (c *fakeChecker) Inhibited(context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on, c.err
}
func (c *fakeChecker) set(on bool) {
	c.mu.Lock()
	c.on = on
	c.mu.Unlock()
}

func runReporter(t *testing.T, r *Reporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(hang):
			t.Error("Run did not return after its context ended")
		}
	})
}

// The reporter sends its first reading, then keeps reporting; an inhibitor
// that says so (while another cannot tell) makes reports inhibited.
func TestReporterReportsIdleAndInhibition(t *testing.T) {
	src := &fakeSource{name: "mutter", idle: 90 * time.Second}
	gone := &fakeChecker{name: "absent", err: errors.New("ServiceUnknown")}
	media := &fakeChecker{name: "media"}
	s := newSender()
	runReporter(t, &Reporter{Candidates: []Candidate{candidate(src, nil)}, Inhibitors: []InhibitChecker{gone, media}, Sender: s, Interval: 20 * time.Millisecond})

	first, next := s.waitFor(t, 0, "a first report", anyReport)
	if first.Source != "mutter" || first.Idle != 90*time.Second || first.Inhibited {
		t.Fatalf("first report %+v", first)
	}
	_, next = s.waitFor(t, next, "a second report", anyReport)
	media.set(true)
	_, next = s.waitFor(t, next, "an inhibited report", func(r Report) bool { return r.Inhibited })
	media.set(false)
	s.waitFor(t, next, "inhibition ended", func(r Report) bool { return !r.Inhibited })
}

// When the desktop signals input the reporter reads and reports at once,
// without waiting for its next reading or its interval.
func TestReporterSignalledInputSentAtOnce(t *testing.T) {
	src := notifyingSource{&fakeSource{name: "mutter", idle: 10 * time.Minute, activity: make(chan struct{}, 1)}}
	s := newSender()
	// Readings and reports an hour apart: only the signal can bring the
	// second report.
	runReporter(t, &Reporter{Candidates: []Candidate{candidate(src, nil)}, Sender: s, Interval: time.Hour, sample: time.Hour})
	_, next := s.waitFor(t, 0, "the first report", anyReport)
	src.set(300*time.Millisecond, nil)
	src.activity <- struct{}{}
	r, _ := s.waitFor(t, next, "the report of the signalled input", anyReport)
	if r.Idle != 300*time.Millisecond {
		t.Fatalf("report %+v", r)
	}
}

// A service that cannot be reached is retried, not given up on.
func TestReporterRetriesUnreachableService(t *testing.T) {
	src := &fakeSource{name: "x11", idle: time.Second}
	s := newSender()
	s.fail = 2
	runReporter(t, &Reporter{Candidates: []Candidate{candidate(src, nil)}, Sender: s, Interval: 10 * time.Millisecond})
	s.waitFor(t, 0, "a report once the service answers", anyReport)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tries < 3 {
		t.Fatalf("%d tries", s.tries)
	}
}

// A source that keeps failing is given up and the sources are chosen again.
func TestReporterChoosesAgainWhenSourceFails(t *testing.T) {
	a := &fakeSource{name: "mutter", idle: time.Second}
	b := &fakeSource{name: "logind", idle: 2 * time.Second}
	var aOpen error
	s := newSender()
	runReporter(t, &Reporter{Candidates: []Candidate{candidate(a, &aOpen), candidate(b, nil)}, Sender: s, Interval: 10 * time.Millisecond, sample: 5 * time.Millisecond})
	_, next := s.waitFor(t, 0, "a report from mutter", func(r Report) bool { return r.Source == "mutter" })
	aOpen = nil
	a.set(0, errors.New("the name org.gnome.Mutter.IdleMonitor was not provided"))
	s.waitFor(t, next, "a report from logind", func(r Report) bool { return r.Source == "logind" && r.Idle == 2*time.Second })
	if !a.isClosed() {
		t.Fatal("the failing source was not closed")
	}
}

// The request is one the service's decoder accepts, with the idle time in
// seconds to the millisecond.
func TestReportRequest(t *testing.T) {
	req, err := admin.DecodeRequest(Report{Source: "x11", Idle: 12500*time.Millisecond + 400*time.Microsecond, Inhibited: true}.Request())
	if err != nil {
		t.Fatal(err)
	}
	a := req.Action
	if a.Kind != admin.KindReportPresence || a.Source != "x11" || *a.IdleSeconds != 12.5 || !*a.Inhibited {
		t.Fatalf("action %+v", a)
	}
	req, err = admin.DecodeRequest(Report{Source: "logind"}.Request())
	if err != nil || *req.Action.IdleSeconds != 0 || *req.Action.Inhibited {
		t.Fatalf("%+v, %v", req.Action, err)
	}
}
