package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrUnsupported is returned (wrapped, with the reason) by a Reclaimer
// method that its upstream kind cannot perform: a kind whose server lists
// no loaded models, offers no unload, or runs no jobs that outlive their
// HTTP request. Callers branch on it with errors.Is and record "cannot"
// rather than a failure.
var ErrUnsupported = errors.New("not supported by this upstream kind")

// Reclaimer is the side of an adapter that talks to the upstream: it
// observes loaded models, tracks and cancels borrowed jobs that outlive
// their request, and unloads borrowed models when lending ends. It is kept
// apart from Adapter so that classification stays a pure function of the
// request.
//
// Every request a Reclaimer makes carries u.Authorization, is bounded by
// ctx (or by u.Timeout when ctx has no deadline) and never follows the
// borrower's credential. Implementations are safe for concurrent use.
type Reclaimer interface {
	// Kind is the config kind served (config.KindOllama, ...).
	Kind() string

	// Loaded lists the models the upstream holds in memory now, named as
	// the upstream lists them. It reports ErrUnsupported for a kind whose
	// server has no such list (ComfyUI).
	Loaded(ctx context.Context, u Upstream) ([]string, error)

	// SameModel reports whether a name from Loaded and a name a borrower's
	// request used refer to the same model (Ollama: "llama3.2" is
	// "llama3.2:latest").
	SameModel(listed, named string) bool

	// Unload asks the upstream to free the models borrowers used. It
	// returns once the upstream has accepted the request; freeing may
	// finish later (Ollama unloads a busy model when its requests end,
	// ComfyUI frees between prompts), so confirm with Loaded (see
	// WaitUnloaded) or by watching GPU memory. A model the upstream does
	// not know, or does not hold, is not an error. Kinds that free memory
	// only wholesale (ComfyUI) free everything, models or none. A kind
	// that cannot unload returns ErrUnsupported.
	Unload(ctx context.Context, u Upstream, models []string) error

	// CancelJob stops a borrower's job that outlives its HTTP request (a
	// ComfyUI prompt): it removes it from the queue when pending, or
	// interrupts it when running, never touching any other job, then waits
	// until the upstream confirms the job gone or ctx ends. stopped is true
	// when the job is confirmed gone (including a job that had already
	// finished); false with a nil error when the upstream accepted the
	// cancel but still had the job when ctx ended. Kinds without such jobs
	// return ErrUnsupported: their work ends when its request is closed.
	CancelJob(ctx context.Context, u Upstream, jobID string) (stopped bool, err error)

	// JobDone reports whether a tracked job has finished (completed,
	// failed, interrupted or removed).
	JobDone(ctx context.Context, u Upstream, jobID string) (done bool, err error)
}

var (
	reclaimersMu sync.RWMutex
	reclaimers   = map[string]Reclaimer{}
)

// RegisterReclaimer makes a kind's Reclaimer available to ReclaimerFor. It
// is called from the init function of each kind's package and panics on
// an empty kind, a nil Reclaimer, a Reclaimer of another kind, or a kind
// registered twice.
func RegisterReclaimer(kind string, r Reclaimer) {
	if kind == "" || r == nil {
		panic("adapter: RegisterReclaimer with empty kind or nil reclaimer")
	}
	if r.Kind() != kind {
		panic("adapter: RegisterReclaimer: reclaimer of kind " + r.Kind() + " registered as " + kind)
	}
	reclaimersMu.Lock()
	defer reclaimersMu.Unlock()
	if _, dup := reclaimers[kind]; dup {
		panic("adapter: RegisterReclaimer called twice for kind " + kind)
	}
	reclaimers[kind] = r
}

// ReclaimerFor returns the Reclaimer of kind. The kind's package must be
// linked in; importing internal/adapter/all links every kind.
func ReclaimerFor(kind string) (Reclaimer, error) {
	reclaimersMu.RLock()
	r := reclaimers[kind]
	reclaimersMu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("adapter: no reclaimer for kind %q (registered: %v)", kind, ReclaimerKinds())
	}
	return r, nil
}

// ReclaimerKinds lists the kinds with a registered Reclaimer, sorted.
func ReclaimerKinds() []string {
	reclaimersMu.RLock()
	defer reclaimersMu.RUnlock()
	kinds := make([]string, 0, len(reclaimers))
	for k := range reclaimers {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// StillLoaded asks r which of models the upstream still lists as loaded
// (compared with r.SameModel). It returns the models as given, in order.
func StillLoaded(ctx context.Context, r Reclaimer, u Upstream, models []string) ([]string, error) {
	if len(models) == 0 {
		return nil, nil
	}
	loaded, err := r.Loaded(ctx, u)
	if err != nil {
		return nil, err
	}
	var still []string
	for _, m := range models {
		if slices.ContainsFunc(loaded, func(l string) bool { return r.SameModel(l, m) }) {
			still = append(still, m)
		}
	}
	return still, nil
}

// Polling bounds for WaitUnloaded and the kinds' job confirmation: the
// first check comes at once, later ones back off from PollMin to PollMax.
const (
	PollMin = 20 * time.Millisecond
	PollMax = 500 * time.Millisecond
)

// WaitUnloaded polls StillLoaded until none of models is loaded or ctx
// ends, and returns the models still loaded at the last check (nil when
// all are gone). The error is ctx's when it ended first, or the last
// failed check's. Without a deadline on ctx it waits at most u's call
// timeout.
func WaitUnloaded(ctx context.Context, r Reclaimer, u Upstream, models []string) ([]string, error) {
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	var still []string
	err := Poll(ctx, func() (bool, error) {
		s, err := StillLoaded(ctx, r, u, models)
		if err != nil {
			return false, err
		}
		still = s
		return len(s) == 0, nil
	})
	if err != nil && still == nil && len(models) > 0 {
		// Never confirmed: report every model as possibly loaded.
		still = slices.Clone(models)
	}
	return still, err
}

// Poll calls check at once and then with a backoff from PollMin to PollMax
// until it reports done or ctx ends. A failed check is retried; when ctx
// ends, Poll returns the last check's error joined with ctx's, or nil once
// check reported done.
func Poll(ctx context.Context, check func() (done bool, err error)) error {
	wait := PollMin
	var last error
	for {
		done, err := check()
		if err == nil && done {
			return nil
		}
		last = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), last)
		case <-t.C:
		}
		wait = min(wait*2, PollMax)
	}
}
