package lending

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// recordingReclaimer stands in for the upstreams in the engine's unit tests
// (the end-to-end tests use real adapters against the shared fake upstreams).
type recordingReclaimer struct {
	mu        sync.Mutex
	unloads   map[string][]string
	cancels   []string
	stopJobs  bool // CancelJob confirms the job gone
	jobsDone  map[string]bool
	upstreams []string
}

func (r *recordingReclaimer) UpstreamsOn(string) []string { return r.upstreams }
func (r *recordingReclaimer) CancelJob(_ context.Context, up, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancels = append(r.cancels, up+"/"+id)
	return r.stopJobs, nil
}
func (r *recordingReclaimer) JobDone(_ context.Context, _, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobsDone[id], nil
}
func (r *recordingReclaimer) Unload(_ context.Context, up string, models []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unloads == nil {
		r.unloads = map[string][]string{}
	}
	r.unloads[up] = append(r.unloads[up], models...)
	return nil
}

func (r *recordingReclaimer) unloaded(up string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.unloads[up]...)
}

func startEngine(t *testing.T, p Policy, rec *recordingReclaimer) (*Engine, *Switches, *Metrics) {
	t.Helper()
	sw := NewSwitches(true, map[string]bool{"gpu0": true})
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineOptions{Policy: p, Switches: sw, Resources: []string{"gpu0"}, Reclaimer: rec, Metrics: m, JobPoll: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, sw, m
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lendable(e *Engine) bool { ok, _ := e.Admit("gpu0"); return ok }

// The owner returns while a borrower streams: admissions close, the stream
// is cancelled after the grace, the borrowed model is unloaded, and lending
// comes back only after idle_after.
func TestEngineReclaimCancelsAndUnloads(t *testing.T) {
	rec := &recordingReclaimer{upstreams: []string{"ollama"}}
	p := Policy{IdleAfter: 200 * time.Millisecond, PresenceSources: true, ReclaimGrace: 20 * time.Millisecond, CancelTimeout: time.Second}
	e, _, m := startEngine(t, p, rec)

	if lendable(e) {
		t.Fatal("lent before any presence report")
	}
	e.ReportActivity(SourceInputDevices, Activity{LastInput: time.Now().Add(-time.Hour)})
	eventually(t, "lending to start", func() bool { return lendable(e) })

	ctx, w, why := e.Acquire(context.Background(), WorkSpec{Upstream: "ollama", Resource: "gpu0", Borrower: "cluster", Model: "llama3:8b"})
	if w == nil {
		t.Fatalf("acquire refused: %s", why)
	}
	e.ReportActivity(SourceInputDevices, Activity{LastInput: time.Now()})
	eventually(t, "admissions to close", func() bool { _, r := e.Admit("gpu0"); return r == ReasonOwnerPresent })
	if _, w2, why := e.Acquire(context.Background(), WorkSpec{Upstream: "ollama", Resource: "gpu0"}); w2 != nil || why != ReasonOwnerPresent {
		t.Fatalf("new work admitted during reclaim: %v", why)
	}
	select {
	case <-ctx.Done(): // the stream is cut after the grace
	case <-time.After(10 * time.Second):
		t.Fatal("the borrowed request was never cancelled")
	}
	w.End() // the gate ends the work when the proxied request returns
	eventually(t, "the unload", func() bool { return len(rec.unloaded("ollama")) == 1 })
	if got := rec.unloaded("ollama"); got[0] != "llama3:8b" {
		t.Fatalf("unloaded %v", got)
	}
	eventually(t, "the reclaim record", func() bool { return e.Status().Resources["gpu0"].LastReclaim != nil })
	lr := e.Status().Resources["gpu0"].LastReclaim
	if lr.Cancelled != 1 || lr.Held != 0 || lr.Reason != ReasonOwnerPresent {
		t.Fatalf("reclaim record %+v", lr)
	}
	if testutil.CollectAndCount(m.reclaim) != 3 {
		t.Fatal("reclaim phases not observed")
	}
	// Lending comes back by itself once the input is idle_after old.
	eventually(t, "lending to resume after idle_after", func() bool { return lendable(e) })
}

// Work that ends within the grace is not cancelled.
func TestEngineGraceLetsWorkFinish(t *testing.T) {
	rec := &recordingReclaimer{upstreams: []string{"ollama"}}
	p := Policy{IdleAfter: time.Hour, PresenceSources: true, ReclaimGrace: 5 * time.Second, CancelTimeout: time.Second}
	e, sw, _ := startEngine(t, p, rec)
	e.ReportActivity(SourceInputDevices, Activity{LastInput: time.Now().Add(-2 * time.Hour)})
	eventually(t, "lending", func() bool { return lendable(e) })
	ctx, w, _ := e.Acquire(context.Background(), WorkSpec{Upstream: "ollama", Resource: "gpu0", Model: "m"})
	sw.Pause(Pauser{})
	eventually(t, "admissions to close", func() bool { return !lendable(e) })
	w.End()
	eventually(t, "the reclaim record", func() bool { return e.Status().Resources["gpu0"].LastReclaim != nil })
	if lr := e.Status().Resources["gpu0"].LastReclaim; lr.Cancelled != 0 || ctx.Err() != nil {
		t.Fatalf("work that finished in the grace was cancelled: %+v", lr)
	}
}

// A job that refuses to stop is held, listed, and released by an administrator.
func TestEngineHoldsWorkThatWillNotStop(t *testing.T) {
	rec := &recordingReclaimer{upstreams: []string{"comfy"}, jobsDone: map[string]bool{}}
	p := Policy{IdleAfter: time.Hour, PresenceSources: false, ReclaimGrace: 0, CancelTimeout: 50 * time.Millisecond}
	e, sw, m := startEngine(t, p, rec)
	eventually(t, "lending (headless)", func() bool { return lendable(e) })
	_, w, _ := e.Acquire(context.Background(), WorkSpec{Upstream: "comfy", Resource: "gpu0", Borrower: "artist"})
	w.SetJob("prompt-1")
	sw.SetResource("gpu0", false)
	eventually(t, "the work to be held", func() bool {
		l := e.Status().Work
		return len(l) == 1 && l[0].State == WorkHeld
	})
	if got := testutil.ToFloat64(m.held); got != 1 {
		t.Fatalf("held gauge = %v", got)
	}
	if len(rec.cancels) == 0 {
		t.Fatal("the job was never asked to stop")
	}
	if _, err := e.Registry().Release(w.ID); err != nil {
		t.Fatal(err)
	}
	if len(e.Status().Work) != 0 || testutil.ToFloat64(m.held) != 0 {
		t.Fatal("released work still listed")
	}
	if _, err := e.Registry().Release(w.ID); err == nil {
		t.Fatal("releasing unknown work succeeded")
	}
}

// A held job that finishes later leaves the list by itself.
func TestEngineHeldJobEndsWhenDone(t *testing.T) {
	rec := &recordingReclaimer{upstreams: []string{"comfy"}, jobsDone: map[string]bool{}}
	p := Policy{PresenceSources: false, CancelTimeout: 20 * time.Millisecond}
	e, sw, _ := startEngine(t, p, rec)
	eventually(t, "lending", func() bool { return lendable(e) })
	_, w, _ := e.Acquire(context.Background(), WorkSpec{Upstream: "comfy", Resource: "gpu0"})
	w.SetJob("p")
	sw.Pause(Pauser{})
	eventually(t, "held", func() bool { l := e.Status().Work; return len(l) == 1 && l[0].State == WorkHeld })
	rec.mu.Lock()
	rec.jobsDone["p"] = true
	rec.mu.Unlock()
	eventually(t, "the finished job to leave the list", func() bool { return len(e.Status().Work) == 0 })
}

// A required pressure source that is malformed fails closed and makes the
// daemon not ready; fixing it lends again.
func TestEngineRequiredPressureFailsClosed(t *testing.T) {
	rec := &recordingReclaimer{}
	p := Policy{PresenceSources: false, RequiredPressure: []string{SourcePressureFile}}
	e, _, _ := startEngine(t, p, rec)
	e.SetReady(SourcePressureFile, false, "malformed: unexpected end of JSON")
	eventually(t, "gpu_pressure", func() bool { _, r := e.Admit("gpu0"); return r == ReasonGPUPressure })
	if e.Ready() {
		t.Fatal("ready while a required input is broken")
	}
	e.ReportPressure(SourcePressureFile, Pressure{Active: false})
	eventually(t, "lending", func() bool { return lendable(e) })
	if !e.Ready() {
		t.Fatal("not ready after the input recovered")
	}
	e.ReportPressure(SourceNVML, Pressure{Resource: "gpu0", Active: true, Reason: "pid 7 uses 3 GiB"})
	eventually(t, "nvml pressure", func() bool { _, r := e.Admit("gpu0"); return r == ReasonGPUPressure })
}

type fakeVRAM struct {
	mu    sync.Mutex
	bytes uint64
}

func (f *fakeVRAM) BorrowedMemory(string) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes, true
}

// unloadingReclaimer frees the fake VRAM when asked to unload.
type unloadingReclaimer struct {
	recordingReclaimer
	vram *fakeVRAM
}

func (u *unloadingReclaimer) Unload(ctx context.Context, up string, models []string) error {
	u.vram.mu.Lock()
	u.vram.bytes = 300 << 20 // the server's own context stays
	u.vram.mu.Unlock()
	return u.recordingReclaimer.Unload(ctx, up, models)
}

// Where NVML measures it, a reclaim confirms the unload freed GPU memory.
func TestEngineConfirmsVRAMFreed(t *testing.T) {
	vram := &fakeVRAM{bytes: 6 << 30}
	rec := &unloadingReclaimer{recordingReclaimer: recordingReclaimer{upstreams: []string{"ollama"}}, vram: vram}
	sw := NewSwitches(true, map[string]bool{"gpu0": true})
	e := NewEngine(EngineOptions{Policy: Policy{CancelTimeout: 5 * time.Second}, Switches: sw, Resources: []string{"gpu0"}, Reclaimer: rec, VRAM: vram})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "lending", func() bool { return lendable(e) })
	_, w, _ := e.Acquire(context.Background(), WorkSpec{Upstream: "ollama", Resource: "gpu0", Model: "m"})
	w.End()
	sw.Pause(Pauser{})
	eventually(t, "the reclaim record", func() bool { return e.Status().Resources["gpu0"].LastReclaim != nil })
	lr := e.Status().Resources["gpu0"].LastReclaim
	if lr.VRAMFreed == nil || !*lr.VRAMFreed || *lr.VRAMBefore != 6<<30 || *lr.VRAMAfter != 300<<20 {
		t.Fatalf("VRAM confirmation: %+v", lr)
	}
}

// With resume_after, a resource reclaimed for a moment is not lent again
// until the hold has passed, even though every input allows it at once.
func TestEngineResumeAfterHoldsThenLends(t *testing.T) {
	p := Policy{PresenceSources: false, CancelTimeout: time.Second, ResumeAfter: 2 * time.Second}
	e, sw, _ := startEngine(t, p, &recordingReclaimer{})
	eventually(t, "lending", func() bool { return lendable(e) })
	sw.Pause(Pauser{})
	eventually(t, "the reclaim record", func() bool { return e.Status().Resources["gpu0"].LastReclaim != nil })
	sw.Resume()
	// Without the hold, the verdict would go straight from lending_paused
	// to lendable.
	eventually(t, "the resume_after hold", func() bool { _, why := e.Admit("gpu0"); return why == ReasonReclaiming })
	eventually(t, "lending after resume_after", func() bool { return lendable(e) })
}
