package lending

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// WorkState is where a borrowed work item is in its life.
type WorkState string

// Work states.
const (
	WorkRunning    WorkState = "running"
	WorkCancelling WorkState = "cancelling"
	WorkHeld       WorkState = "held"
)

// WorkSpec describes borrowed work about to start.
type WorkSpec struct {
	Upstream string
	Resource string
	// Borrower is the token name (or how an anonymous borrower came in).
	Borrower string
	// Model is the model the request names, when known; reclaim unloads it.
	Model string
}

// Work is one admitted piece of borrowed work: an HTTP request being
// forwarded, or a job (a ComfyUI prompt) that outlives its request.
type Work struct {
	ID       uint64    `json:"id"`
	Upstream string    `json:"upstream"`
	Resource string    `json:"resource"`
	Borrower string    `json:"borrower"`
	Model    string    `json:"model,omitempty"`
	JobID    string    `json:"job_id,omitempty"`
	Started  time.Time `json:"started"`
	State    WorkState `json:"state"`
	// HeldSince is when the work became held.
	HeldSince time.Time `json:"held_since,omitzero"`

	cancel   context.CancelFunc
	done     chan struct{}
	reg      *Registry
	tracking bool // a goroutine watches the job
}

// startTracking marks the job watched; false if it already was.
func (w *Work) startTracking() bool {
	w.reg.mu.Lock()
	defer w.reg.mu.Unlock()
	if w.tracking {
		return false
	}
	w.tracking = true
	return true
}

// Done is closed when the work has ended.
func (w *Work) Done() <-chan struct{} { return w.done }

// End records that the work finished (its response ended, or its job
// completed). Calling it twice is harmless.
func (w *Work) End() { w.reg.end(w) }

// CurrentState returns the work's state now.
func (w *Work) CurrentState() WorkState {
	w.reg.mu.Lock()
	defer w.reg.mu.Unlock()
	return w.State
}

func (w *Work) jobID() string {
	w.reg.mu.Lock()
	defer w.reg.mu.Unlock()
	return w.JobID
}

// SetJob turns a request into a job that lives on after the response: the
// work stays registered until End, and cancelling it goes through the
// upstream's job cancel.
func (w *Work) SetJob(id string) {
	w.reg.mu.Lock()
	defer w.reg.mu.Unlock()
	w.JobID = id
}

// Registry holds the running and held work of every gate.
type Registry struct {
	mu     sync.Mutex
	nextID uint64
	items  map[uint64]*Work
	now    func() time.Time
	// models remembers, per upstream, the models borrowers used since the
	// last unload.
	models map[string]map[string]bool
	// busy counts running work per resource; busySince is when it last
	// rose from zero; lent receives the seconds a resource was busy.
	busy      map[string]int
	busySince map[string]time.Time
	lent      func(resource string, seconds float64)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{items: map[uint64]*Work{}, now: time.Now, models: map[string]map[string]bool{},
		busy: map[string]int{}, busySince: map[string]time.Time{}}
}

// startLocked registers work; the caller holds mu (Acquire does, so that
// admission and registration are one step against reclaim).
func (r *Registry) startLocked(spec WorkSpec, cancel context.CancelFunc) *Work {
	r.nextID++
	w := &Work{ID: r.nextID, Upstream: spec.Upstream, Resource: spec.Resource, Borrower: spec.Borrower, Model: spec.Model,
		Started: r.now(), State: WorkRunning, cancel: cancel, done: make(chan struct{}), reg: r}
	r.items[w.ID] = w
	if r.busy[spec.Resource] == 0 {
		r.busySince[spec.Resource] = w.Started
	}
	r.busy[spec.Resource]++
	if r.models[spec.Upstream] == nil {
		r.models[spec.Upstream] = map[string]bool{}
	}
	if spec.Model != "" {
		r.models[spec.Upstream][spec.Model] = true
	}
	return w
}

func (r *Registry) end(w *Work) {
	r.mu.Lock()
	_, ok := r.items[w.ID]
	var lentFor float64
	if ok {
		delete(r.items, w.ID)
		close(w.done)
		r.busy[w.Resource]--
		if r.busy[w.Resource] == 0 {
			lentFor = r.now().Sub(r.busySince[w.Resource]).Seconds()
		}
	}
	lent := r.lent
	r.mu.Unlock()
	if lentFor > 0 && lent != nil {
		lent(w.Resource, lentFor)
	}
}

// running returns the resource's work that has not ended; the caller holds mu.
func (r *Registry) onResourceLocked(resource string) []*Work {
	var out []*Work
	for _, w := range r.items {
		if w.Resource == resource {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *Work) int { return int(a.ID) - int(b.ID) })
	return out
}

// takeModels returns and forgets the models borrowers used on upstream,
// and whether borrowers used it at all since the last unload.
func (r *Registry) takeModels(upstream string) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	used, ok := r.models[upstream]
	var out []string
	for m := range used {
		out = append(out, m)
	}
	delete(r.models, upstream)
	slices.Sort(out)
	return out, ok
}

func (r *Registry) setState(w *Work, st WorkState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.items[w.ID]; !ok {
		return
	}
	w.State = st
	if st == WorkHeld {
		w.HeldSince = r.now()
	}
}

// List returns a copy of every work item, oldest first.
func (r *Registry) List() []Work {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Work, 0, len(r.items))
	for _, w := range r.items {
		c := *w
		c.cancel, c.done, c.reg = nil, nil, nil
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Work) int { return int(a.ID) - int(b.ID) })
	return out
}

// Release drops held (or any) work by id: an administrator says it is over.
// upstreamStopped records whether they confirmed the upstream stopped it.
func (r *Registry) Release(id uint64) (Work, error) {
	r.mu.Lock()
	w, ok := r.items[id]
	var c Work
	if ok {
		// Copied under the lock: a reclaim may be changing its state.
		c = *w
	}
	r.mu.Unlock()
	if !ok {
		return Work{}, fmt.Errorf("no work with id %d", id)
	}
	if w.cancel != nil {
		w.cancel()
	}
	r.end(w)
	c.cancel, c.done, c.reg = nil, nil, nil
	return c, nil
}

// heldCount counts held work.
func (r *Registry) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.items {
		if w.State == WorkHeld {
			n++
		}
	}
	return n
}
