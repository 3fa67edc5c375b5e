package lending

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reclaimer does what a reclaim needs of the upstreams. The daemon
// implements it with the adapters' reclaim side.
type Reclaimer interface {
	// UpstreamsOn lists the upstreams whose work runs on resource.
	UpstreamsOn(resource string) []string
	// CancelJob stops a borrower's job that outlives its request; stopped
	// reports whether the upstream confirmed it gone.
	CancelJob(ctx context.Context, upstream, jobID string) (stopped bool, err error)
	// JobDone reports whether a job has finished.
	JobDone(ctx context.Context, upstream, jobID string) (bool, error)
	// Unload frees the models borrowers used on upstream (all it can when
	// models is empty and the upstream frees memory wholesale). It is only
	// called for upstreams borrowers used since the last unload. An error
	// that wraps ErrCannotUnload means the upstream has no way to unload.
	Unload(ctx context.Context, upstream string, models []string) error
}

// ErrCannotUnload marks an upstream kind that has no unload call; a reclaim
// records it without treating it as a failure.
var ErrCannotUnload = errors.New("this upstream cannot unload models")

// VRAM reports the GPU memory the upstream servers hold on a resource
// (NVML). ok is false where it cannot be measured.
type VRAM interface {
	BorrowedMemory(resource string) (bytes uint64, ok bool)
}

// EngineOptions build an Engine.
type EngineOptions struct {
	// VRAM, when set, lets a reclaim confirm that unloading freed memory.
	VRAM      VRAM
	Policy    Policy
	Switches  *Switches
	Resources []string
	Reclaimer Reclaimer
	Metrics   *Metrics
	Log       *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// JobPoll is how often jobs are checked for completion (default 1s).
	JobPoll time.Duration
}

// Engine decides, for every resource, whether it may be lent now, and takes
// the GPU back when that ends. One goroutine (Run) owns the inputs and
// decides; the gates read its published verdicts without waiting on it.
type Engine struct {
	opts EngineOptions
	reg  *Registry
	log  *slog.Logger
	now  func() time.Time

	events      chan func()
	stopped     chan struct{} // closed when Run returns
	verdicts    atomic.Pointer[map[string]Verdict]
	status      atomic.Pointer[Status]
	reclaimDone chan reclaimRecord

	// Owned by the Run goroutine.
	policy     Policy
	sources    map[string]*SourceState
	reclaiming map[string]bool
	lastRec    map[string]reclaimRecord
	holdUntil  map[string]time.Time // resume_after after each reclaim
}

// Status is the engine's state for /status.
type Status struct {
	Presence  PresenceState             `json:"presence"`
	Inputs    []SourceState             `json:"inputs"`
	Resources map[string]ResourceStatus `json:"resources"`
	Work      []Work                    `json:"work"`
	// Ready is false while a required input is not ready; NotReady says
	// which. Required inputs are those that fail closed (the GPU-pressure
	// state file when configured). Presence sources are not required: while
	// none knows, lending holds (presence_unknown) but the daemon is ready.
	Ready    bool     `json:"ready"`
	NotReady []string `json:"not_ready,omitempty"`
}

// ResourceStatus is one resource in Status.
type ResourceStatus struct {
	Verdict
	Enabled     bool           `json:"enabled"`
	Pressure    PressureState  `json:"pressure"`
	Reclaiming  bool           `json:"reclaiming"`
	LastReclaim *reclaimRecord `json:"last_reclaim,omitempty"`
}

type reclaimRecord struct {
	Resource string    `json:"-"`
	Reason   Reason    `json:"reason"`
	At       time.Time `json:"at"`
	// Seconds from the event to each phase's end.
	AdmissionsClosedS float64  `json:"admissions_closed_s"`
	WorkEndedS        float64  `json:"work_ended_s"`
	UnloadedS         float64  `json:"unloaded_s"`
	Cancelled         int      `json:"cancelled"`
	Held              int      `json:"held"`
	UnloadErrors      []string `json:"unload_errors,omitempty"`
	// VRAM before and after the unload, where NVML measures it; VRAMFreed
	// says whether the upstream servers' memory went down.
	VRAMBefore *uint64 `json:"vram_before_bytes,omitempty"`
	VRAMAfter  *uint64 `json:"vram_after_bytes,omitempty"`
	VRAMFreed  *bool   `json:"vram_freed,omitempty"`
}

// NewEngine returns an engine; call Run to start deciding. Until then every
// resource is not lendable (presence_unknown).
func NewEngine(o EngineOptions) *Engine {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.JobPoll <= 0 {
		o.JobPoll = time.Second
	}
	e := &Engine{
		opts:        o,
		reg:         NewRegistry(),
		log:         o.Log.With("component", "lending"),
		now:         o.Now,
		events:      make(chan func(), 256),
		stopped:     make(chan struct{}),
		reclaimDone: make(chan reclaimRecord, 16),
		policy:      o.Policy,
		sources:     map[string]*SourceState{},
		reclaiming:  map[string]bool{},
		lastRec:     map[string]reclaimRecord{},
		holdUntil:   map[string]time.Time{},
	}
	e.reg.now = o.Now
	if o.Metrics != nil {
		e.reg.lent = o.Metrics.addLent
		o.Metrics.init(o.Resources)
		held := e.reg.heldCount
		o.Metrics.heldFn.Store(&held)
	}
	initial := map[string]Verdict{}
	for _, r := range o.Resources {
		initial[r] = Verdict{Reason: ReasonPresenceUnknown}
	}
	e.verdicts.Store(&initial)
	// Until the first decision, the daemon is ready unless an input that
	// fails closed is configured (it has not reported yet).
	e.status.Store(&Status{Resources: map[string]ResourceStatus{}, Ready: len(o.Policy.RequiredPressure) == 0})
	return e
}

// Registry returns the work registry.
func (e *Engine) Registry() *Registry { return e.reg }

// Admit reports whether inference may start on resource now. The owner's
// switches are read directly, so a pause closes admissions the moment it is
// answered, before the engine's loop has seen it.
func (e *Engine) Admit(resource string) (bool, Reason) {
	if ok, why := e.opts.Switches.Admit(resource); !ok {
		return false, why
	}
	v, ok := (*e.verdicts.Load())[resource]
	if !ok {
		return false, ReasonResourceDisabled
	}
	return v.Lendable, v.Reason
}

// Acquire admits and registers borrowed work in one step, so that a reclaim
// either refuses it or sees it. The returned context is cancelled when
// reclaim cancels the work; call Work.End when it finishes.
func (e *Engine) Acquire(parent context.Context, spec WorkSpec) (context.Context, *Work, Reason) {
	e.reg.mu.Lock()
	defer e.reg.mu.Unlock()
	if ok, why := e.Admit(spec.Resource); !ok {
		return nil, nil, why
	}
	ctx, cancel := context.WithCancel(parent)
	return ctx, e.reg.startLocked(spec, cancel), ReasonNone
}

// TrackJob watches a job (ComfyUI prompt) until the upstream reports it
// done, then ends the work. Stops when the work ends another way.
func (e *Engine) TrackJob(w *Work) {
	if !w.startTracking() {
		return // already watched
	}
	go func() {
		t := time.NewTicker(e.opts.JobPoll)
		defer t.Stop()
		for {
			select {
			case <-w.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.JobPoll*5)
			done, err := e.jobDone(ctx, w.Upstream, w.jobID())
			cancel()
			if err == nil && done {
				w.End()
				return
			}
		}
	}()
}

// Status returns the latest state.
func (e *Engine) Status() Status {
	st := *e.status.Load()
	st.Work = e.reg.List()
	return st
}

// Ready reports whether every required input is ready.
func (e *Engine) Ready() bool { return e.status.Load().Ready }

// SetPolicy replaces the policy (a settings change).
func (e *Engine) SetPolicy(p Policy) { e.send(func() { e.policy = p }) }

// send queues f for the Run goroutine; after Run has returned it is dropped,
// so a report arriving during shutdown never blocks its sender.
func (e *Engine) send(f func()) {
	select {
	case e.events <- f:
	case <-e.stopped:
	}
}

// ReportActivity implements Sink.
func (e *Engine) ReportActivity(source string, a Activity) {
	e.send(func() {
		s := e.source(source)
		s.Ready, s.Reason = true, ""
		s.Activity = &a
	})
}

// ReportPressure implements Sink.
func (e *Engine) ReportPressure(source string, p Pressure) {
	e.send(func() {
		s := e.source(source)
		s.Ready, s.Reason = true, ""
		if s.Pressure == nil {
			s.Pressure = map[string]Pressure{}
		}
		s.Pressure[p.Resource] = p
	})
}

// SetReady implements Sink.
func (e *Engine) SetReady(source string, ready bool, reason string) {
	e.send(func() {
		s := e.source(source)
		s.Ready, s.Reason = ready, reason
	})
}

// Forget implements Sink.
func (e *Engine) Forget(source string) { e.send(func() { delete(e.sources, source) }) }

func (e *Engine) source(name string) *SourceState {
	s, ok := e.sources[name]
	if !ok {
		s = &SourceState{Name: name}
		e.sources[name] = s
	}
	return s
}

// Run decides until ctx ends.
func (e *Engine) Run(ctx context.Context) {
	defer close(e.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := e.recompute()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(e.now()), time.Millisecond))
		}
		changed := e.opts.Switches.Changed()
		select {
		case f := <-e.events:
			f()
			// Apply everything already queued before deciding again.
			for drained := false; !drained; {
				select {
				case f := <-e.events:
					f()
				default:
					drained = true
				}
			}
		case <-changed:
		case <-timer.C:
		case rec := <-e.reclaimDone:
			e.reclaiming[rec.Resource] = false
			e.lastRec[rec.Resource] = rec
			if e.policy.ResumeAfter > 0 {
				e.holdUntil[rec.Resource] = e.now().Add(e.policy.ResumeAfter)
			}
		case <-ctx.Done():
			return
		}
	}
}

// recompute evaluates every resource, publishes the verdicts, starts a
// reclaim for each resource that stopped being lendable, and returns when
// to look again.
func (e *Engine) recompute() time.Time {
	now := e.now()
	sources := make([]SourceState, 0, len(e.sources))
	for _, name := range slices.Sorted(maps.Keys(e.sources)) {
		sources = append(sources, *e.sources[name])
	}
	presence, next := FoldPresence(now, e.policy.IdleAfter, sources)
	pressure := FoldPressure(e.opts.Resources, e.policy.RequiredPressure, sources)
	sw := e.opts.Switches.State()
	sit := Situation{Now: now, LendingEnabled: sw.LendingEnabled, Enabled: sw.Resources, Presence: presence, Pressure: pressure,
		Reclaiming: e.reclaiming, HoldUntil: e.holdUntil}
	verdicts := Evaluate(e.policy, sit)
	for _, t := range e.holdUntil {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if len(e.policy.Windows) > 0 {
		minute := now.Truncate(time.Minute).Add(time.Minute)
		if next.IsZero() || minute.Before(next) {
			next = minute
		}
	}

	// Publish and collect the work to reclaim in one step against Acquire.
	type job struct {
		resource string
		why      Reason
		work     []*Work
	}
	var jobs []job
	e.reg.mu.Lock()
	prev := *e.verdicts.Load()
	e.verdicts.Store(&verdicts)
	for id, v := range verdicts {
		if prev[id].Lendable && !v.Lendable {
			jobs = append(jobs, job{resource: id, why: v.Reason, work: e.reg.onResourceLocked(id)})
		}
	}
	e.reg.mu.Unlock()

	for _, j := range jobs {
		e.reclaiming[j.resource] = true
		e.log.Info("lending ended; reclaiming", "resource", j.resource, "reason", j.why, "work", len(j.work))
		go e.reclaim(j.resource, j.why, j.work, now, e.policy)
	}
	for id, v := range verdicts {
		if !prev[id].Lendable && v.Lendable {
			e.log.Info("lending started", "resource", id)
		}
	}
	e.publishStatus(presence, pressure, sources, verdicts, sw.Resources)
	return next
}

func (e *Engine) publishStatus(presence PresenceState, pressure map[string]PressureState, sources []SourceState, verdicts map[string]Verdict, enabled map[string]bool) {
	st := &Status{Presence: presence, Inputs: sources, Resources: map[string]ResourceStatus{}, Ready: true}
	for id, v := range verdicts {
		rs := ResourceStatus{Verdict: v, Enabled: enabled[id], Pressure: pressure[id], Reclaiming: e.reclaiming[id]}
		if rec, ok := e.lastRec[id]; ok {
			rec := rec
			rs.LastReclaim = &rec
		}
		st.Resources[id] = rs
	}
	for _, req := range e.policy.RequiredPressure {
		i := slices.IndexFunc(sources, func(s SourceState) bool { return s.Name == req })
		switch {
		case i < 0:
			st.Ready = false
			st.NotReady = append(st.NotReady, req+": no report yet")
		case !sources[i].Ready:
			st.Ready = false
			st.NotReady = append(st.NotReady, req+": "+sources[i].Reason)
		}
	}
	e.status.Store(st)
	if m := e.opts.Metrics; m != nil {
		m.observe(st)
	}
}

// reclaim takes a resource back: let work run for the grace, cancel what is
// left, hold what will not end, then unload the borrowed models.
func (e *Engine) reclaim(resource string, why Reason, work []*Work, at time.Time, p Policy) {
	rec := reclaimRecord{Resource: resource, Reason: why, At: at, AdmissionsClosedS: e.now().Sub(at).Seconds()}
	graceEnd := at.Add(p.ReclaimGrace)
	for _, w := range work {
		select {
		case <-w.Done():
		case <-time.After(max(time.Until(graceEnd), 0)):
		}
	}
	// One deadline covers asking jobs to stop and waiting for all work to
	// end: work not confirmed ended by then is held.
	waitEnd := time.Now().Add(p.CancelTimeout)
	var cancelled []*Work
	var jobs sync.WaitGroup
	for _, w := range work {
		select {
		case <-w.Done():
			continue
		default:
		}
		cancelled = append(cancelled, w)
		e.reg.setState(w, WorkCancelling)
		if w.cancel != nil {
			w.cancel()
		}
		if id := w.jobID(); id != "" {
			// Jobs are cancelled in parallel: each may wait up to the
			// timeout for its confirmation.
			jobs.Add(1)
			go func() {
				defer jobs.Done()
				ctx, cancel := context.WithDeadline(context.Background(), waitEnd)
				stopped, err := e.cancelJob(ctx, w.Upstream, id)
				cancel()
				if err != nil {
					e.log.Warn("cancelling borrowed job failed", "upstream", w.Upstream, "job", id, "err", err)
				}
				if stopped {
					w.End()
				}
			}()
		}
	}
	jobs.Wait()
	rec.Cancelled = len(cancelled)
	for _, w := range cancelled {
		select {
		case <-w.Done():
		case <-time.After(max(time.Until(waitEnd), 0)):
			e.reg.setState(w, WorkHeld)
			rec.Held++
			e.log.Warn("borrowed work did not stop; holding it until it ends or is released", "id", w.ID, "upstream", w.Upstream, "borrower", w.Borrower)
			if w.jobID() != "" {
				e.TrackJob(w)
			}
		}
	}
	rec.WorkEndedS = e.now().Sub(at).Seconds()
	before, measured := e.vram(resource)
	unloaded := false
	for _, up := range e.upstreamsOn(resource) {
		models, used := e.reg.takeModels(up)
		if !used {
			continue // never unload what only the owner loaded
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.CancelTimeout)
		err := e.opts.Reclaimer.Unload(ctx, up, models)
		cancel()
		unloaded = unloaded || err == nil
		if errors.Is(err, ErrCannotUnload) {
			e.log.Info("upstream cannot unload; borrowed models stay until it evicts them", "upstream", up, "models", models)
			continue
		}
		if err != nil {
			rec.UnloadErrors = append(rec.UnloadErrors, up+": "+err.Error())
			e.log.Warn("unloading borrowed models failed", "upstream", up, "models", models, "err", err)
		}
	}
	if measured && unloaded {
		e.confirmFreed(&rec, resource, before, p.CancelTimeout)
	}
	rec.UnloadedS = e.now().Sub(at).Seconds()
	if m := e.opts.Metrics; m != nil {
		m.observeReclaim(rec)
	}
	e.log.Info("reclaim finished", "resource", resource, "reason", why, "cancelled", rec.Cancelled, "held", rec.Held,
		"admissions_closed_s", rec.AdmissionsClosedS, "work_ended_s", rec.WorkEndedS, "unloaded_s", rec.UnloadedS)
	select {
	case e.reclaimDone <- rec:
	case <-e.stopped:
	}
}

// With no Reclaimer (tests of the gates alone) reclaim still cancels
// requests, but has no upstream to unload or to ask about jobs.
func (e *Engine) upstreamsOn(resource string) []string {
	if e.opts.Reclaimer == nil {
		return nil
	}
	return e.opts.Reclaimer.UpstreamsOn(resource)
}

func (e *Engine) cancelJob(ctx context.Context, upstream, id string) (bool, error) {
	if e.opts.Reclaimer == nil {
		return false, nil
	}
	return e.opts.Reclaimer.CancelJob(ctx, upstream, id)
}

func (e *Engine) jobDone(ctx context.Context, upstream, id string) (bool, error) {
	if e.opts.Reclaimer == nil {
		return false, nil
	}
	return e.opts.Reclaimer.JobDone(ctx, upstream, id)
}

func (e *Engine) vram(resource string) (uint64, bool) {
	if e.opts.VRAM == nil {
		return 0, false
	}
	return e.opts.VRAM.BorrowedMemory(resource)
}

// confirmFreed waits (up to limit) for the upstream servers' GPU memory to
// fall below what it was before the unload, and records the outcome. A
// server keeps its own context after unloading, so "freed" means "went
// down", not "reached zero".
func (e *Engine) confirmFreed(rec *reclaimRecord, resource string, before uint64, limit time.Duration) {
	rec.VRAMBefore = &before
	freed := before == 0
	after := before
	deadline := time.Now().Add(limit)
	for !freed && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		b, ok := e.vram(resource)
		if !ok {
			break
		}
		after = b
		freed = b < before
	}
	rec.VRAMAfter, rec.VRAMFreed = &after, &freed
	if !freed {
		e.log.Warn("the upstream servers' GPU memory did not go down after unloading", "resource", resource, "bytes", after)
	}
}
