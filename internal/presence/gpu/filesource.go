package gpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// FileOptions tunes a FileSource. Zero values take the defaults.
type FileOptions struct {
	// Resources are the known resource ids; a file naming another is
	// malformed. Nil accepts any.
	Resources []string
	// PollInterval is the fallback re-read, for when change notification
	// misses something or is unavailable (default 5s).
	PollInterval time.Duration
	// Settle is how long to wait after a change before reading, so that a
	// writer that truncates and then writes is read once, whole (default
	// 100ms). Writers should still prefer writing a temporary file and
	// renaming it over the state file.
	Settle time.Duration
	Log    *slog.Logger
}

// FileSource reports what the GPU-pressure state file says (see State).
// It watches the file's directory, so atomic renames are seen, and
// re-reads on a slow poll as well.
//
// Readiness: a missing file is no pressure and ready (nothing claims
// pressure); an unreadable or malformed file is not ready ("malformed:
// ..."), as is one past its expiry ("stale since ..."); the engine counts a
// required source that is not ready as pressure. Pressure is reported per
// resource: "" (every resource) always, plus the resource the file names.
type FileSource struct {
	sink   lending.Sink
	path   string
	known  []string
	poll   time.Duration
	settle time.Duration
	log    *slog.Logger

	// Owned by Run.
	last        map[string]lending.Pressure // resource -> last report
	ready       *bool
	readyReason string
	expiry      *time.Timer
}

// NewFileSource returns a source for the state file at path (already
// resolved against the config directory). Run starts it. To follow a new
// path, end Run and start another source.
func NewFileSource(sink lending.Sink, path string, o FileOptions) *FileSource {
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 100 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &FileSource{
		sink:   sink,
		path:   filepath.Clean(path),
		known:  o.Resources,
		poll:   o.PollInterval,
		settle: o.Settle,
		log:    o.Log.With("component", "gpu-pressure-file", "path", path),
		last:   map[string]lending.Pressure{},
	}
}

// Run watches the file until ctx ends. It returns nil.
func (f *FileSource) Run(ctx context.Context) error {
	dir, base := filepath.Dir(f.path), filepath.Base(f.path)
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.log.Warn("change notification unavailable; polling only", "err", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	watch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(dir); err != nil {
			// The directory may not exist yet; the poll tries again.
			f.log.Debug("cannot watch the directory yet", "dir", dir, "err", err)
			return
		}
		watching = true
	}

	watch()
	f.check()
	defer func() {
		if f.expiry != nil {
			f.expiry.Stop()
		}
	}()
	poll := time.NewTicker(f.poll)
	defer poll.Stop()
	settle := time.NewTimer(f.settle)
	settle.Stop()
	defer settle.Stop()
	for {
		var expired <-chan time.Time
		if f.expiry != nil {
			expired = f.expiry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false // the directory went away; the poll re-adds it
				settle.Reset(f.settle)
				continue
			}
			if filepath.Base(ev.Name) == base && ev.Op != fsnotify.Chmod {
				settle.Reset(f.settle)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			f.log.Warn("change notification error", "err", err)
			settle.Reset(f.settle)
		case <-settle.C:
			f.check()
		case <-expired:
			f.expiry = nil
			f.check()
		case <-poll.C:
			watch()
			f.check()
		}
	}
}

// check reads the file and reports what changed.
func (f *FileSource) check() {
	st, err := f.read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.apply(State{})
	case err != nil:
		f.setReady(false, err.Error())
	case !st.Expires.IsZero() && !time.Now().Before(st.Expires):
		f.setReady(false, "stale since "+st.Expires.Format(time.RFC3339))
	default:
		f.apply(st)
		if !st.Expires.IsZero() {
			f.armExpiry(time.Until(st.Expires))
		}
	}
}

func (f *FileSource) read() (State, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return State{}, err
		}
		return State{}, fmt.Errorf("unreadable: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxStateBytes+1))
	if err != nil {
		return State{}, fmt.Errorf("unreadable: %w", err)
	}
	st, err := ParseState(b)
	if err != nil {
		return State{}, fmt.Errorf("malformed: %w", err)
	}
	if st.Resource != "" && f.known != nil && !slices.Contains(f.known, st.Resource) {
		return State{}, fmt.Errorf("malformed: \"resource\": no resource %q is configured", st.Resource)
	}
	return st, nil
}

func (f *FileSource) armExpiry(d time.Duration) {
	if f.expiry != nil {
		f.expiry.Stop()
	}
	f.expiry = time.NewTimer(max(d, 0))
}

// apply reports a valid state: every resource ("") not under pressure
// unless the file says so, the named resource under pressure if it does;
// a resource no longer named is cleared. Then the source is ready.
func (f *FileSource) apply(st State) {
	want := map[string]lending.Pressure{"": {}}
	if st.Pressure {
		reason := "state file"
		if st.Reason != "" {
			reason += ": " + st.Reason
		}
		want[st.Resource] = lending.Pressure{Resource: st.Resource, Active: true, Reason: reason}
	}
	for res := range f.last {
		if _, ok := want[res]; !ok {
			f.sink.ReportPressure(SourcePressureFile, lending.Pressure{Resource: res})
			delete(f.last, res)
		}
	}
	for _, res := range []string{"", st.Resource} {
		p, ok := want[res]
		if !ok {
			continue
		}
		if last, seen := f.last[res]; seen && last == p {
			continue
		}
		f.last[res] = p
		f.sink.ReportPressure(SourcePressureFile, p)
		if p.Active {
			f.log.Info("gpu pressure from the state file", "resource", res, "reason", p.Reason)
		}
	}
	f.setReady(true, "")
}

func (f *FileSource) setReady(ready bool, reason string) {
	if f.ready != nil && *f.ready == ready && f.readyReason == reason {
		return
	}
	f.ready, f.readyReason = &ready, reason
	if ready {
		f.log.Info("gpu pressure file ready")
	} else {
		f.log.Warn("gpu pressure file not ready", "reason", reason)
	}
	f.sink.SetReady(SourcePressureFile, ready, reason)
}
