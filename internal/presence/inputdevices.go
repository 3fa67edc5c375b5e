package presence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// InputDevices watches evdev devices (/dev/input/event*) for the owner's
// keyboard, mouse and touchpad input, and reports each input as
// Activity{LastInput: when it was read} under SourceInputDevices.
//
// It reads passively (it never grabs a device), re-reads the glob every
// Rescan so hot-plugged devices join, drops a device whose read fails
// (logging why) and retries a node that failed only after RetryFailed or
// once the node is replaced. Reports are coalesced: the first input after a
// quiet spell is reported at once, later input at most every Coalesce.
// While no device matching Glob can be read the source is not ready.
type InputDevices struct {
	// Glob selects the devices; DefaultInputDevices when empty. Tests point
	// it at named pipes that carry real input_event records.
	Glob string
	// Rescan is how often the glob is read again; DefaultRescan when zero.
	Rescan time.Duration
	// Coalesce is the shortest gap between two reports; DefaultCoalesce
	// when zero.
	Coalesce time.Duration
	// RetryFailed is how long a device node that failed is left alone;
	// DefaultRetryFailed when zero.
	RetryFailed time.Duration
	// Log receives device changes and failures; nil logs nothing.
	Log *slog.Logger
}

// device is one open input device.
type device struct {
	path string
	info os.FileInfo
	f    *os.File
	// dropped is set when the loop closes the device itself, so that the
	// read error that follows is not a failure.
	dropped atomic.Bool
}

// failure is a device node that could not be opened or read.
type failure struct {
	info os.FileInfo // nil when the node could not be examined
	at   time.Time
	msg  string
}

type readEnd struct {
	dev *device
	err error
}

// inputWatch is one Run's state, owned by Run's goroutine.
type inputWatch struct {
	cfg   InputDevices
	sink  lending.Sink
	log   *slog.Logger
	done  <-chan struct{}
	wg    sync.WaitGroup
	ended chan readEnd
	// lastInput is when a reader last read owner input (Unix nanoseconds);
	// kick wakes the loop after it is set.
	lastInput atomic.Int64
	kick      chan struct{}

	open   map[string]*device
	failed map[string]failure
	ready  *bool
	reason string
}

// Run watches the devices until ctx ends, then closes them and returns nil.
// It returns an error only for a glob that is not a valid pattern.
func (d *InputDevices) Run(ctx context.Context, sink lending.Sink) error {
	cfg := *d
	if cfg.Glob == "" {
		cfg.Glob = DefaultInputDevices
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = DefaultRescan
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = DefaultCoalesce
	}
	if cfg.RetryFailed <= 0 {
		cfg.RetryFailed = DefaultRetryFailed
	}
	if _, err := filepath.Match(cfg.Glob, ""); err != nil {
		sink.SetReady(SourceInputDevices, false, fmt.Sprintf("%q is not a valid glob pattern", cfg.Glob))
		return fmt.Errorf("presence: input devices %q: %w", cfg.Glob, err)
	}
	w := &inputWatch{
		cfg:    cfg,
		sink:   sink,
		log:    orDiscard(cfg.Log).With("component", "presence", "source", SourceInputDevices),
		done:   ctx.Done(),
		ended:  make(chan readEnd),
		kick:   make(chan struct{}, 1),
		open:   map[string]*device{},
		failed: map[string]failure{},
	}
	defer w.closeAll()

	co := coalescer{every: cfg.Coalesce}
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	rescan := time.NewTicker(cfg.Rescan)
	defer rescan.Stop()

	w.scan(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rescan.C:
			w.scan(time.Now())
		case e := <-w.ended:
			w.readEnded(e, time.Now())
		case <-w.kick:
			now := time.Now()
			report, at := co.input(now)
			if report {
				w.report()
			} else if !at.IsZero() {
				flush.Reset(at.Sub(now))
			}
		case <-flush.C:
			if co.flush(time.Now()) {
				w.report()
			}
		}
	}
}

func (w *inputWatch) report() {
	w.sink.ReportActivity(SourceInputDevices, lending.Activity{LastInput: time.Unix(0, w.lastInput.Load())})
}

// scan reads the glob, opens the devices that are new and drops those that
// are gone or replaced.
func (w *inputWatch) scan(now time.Time) {
	paths, _ := filepath.Glob(w.cfg.Glob) // the pattern was checked
	present := map[string]bool{}
	for _, path := range paths {
		present[path] = true
		info, statErr := os.Stat(path)
		if dev, ok := w.open[path]; ok {
			if statErr == nil && os.SameFile(dev.info, info) {
				continue
			}
			w.drop(dev) // replaced by another node
		}
		if f, ok := w.failed[path]; ok && now.Sub(f.at) < w.cfg.RetryFailed && sameNode(f.info, info) {
			continue
		}
		if statErr != nil {
			w.fail(path, nil, now, statErr)
			continue
		}
		f, err := openDevice(path)
		if err != nil {
			w.fail(path, info, now, err)
			continue
		}
		if why := skipDevice(f); why != "" {
			f.Close()
			w.fail(path, info, now, errors.New(why))
			continue
		}
		dev := &device{path: path, info: info, f: f}
		w.open[path] = dev
		if _, was := w.failed[path]; was {
			w.log.Info("input device readable again", "device", path)
		} else {
			w.log.Debug("watching input device", "device", path)
		}
		delete(w.failed, path)
		w.wg.Add(1)
		go w.read(dev)
	}
	for path, dev := range w.open {
		if !present[path] {
			w.log.Debug("input device gone", "device", path)
			w.drop(dev)
		}
	}
	for path := range w.failed {
		if !present[path] {
			delete(w.failed, path)
		}
	}
	w.updateReady()
}

func sameNode(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b)
}

// fail records a node that could not be used, logging it when its error is
// new.
func (w *inputWatch) fail(path string, info os.FileInfo, now time.Time, err error) {
	msg := failureMessage(path, err)
	if prev, ok := w.failed[path]; !ok || prev.msg != msg {
		w.log.Warn("input device not readable; leaving it out", "device", path, "err", msg, "retry_in", w.cfg.RetryFailed)
	}
	w.failed[path] = failure{info: info, at: now, msg: msg}
}

func (w *inputWatch) drop(dev *device) {
	dev.dropped.Store(true)
	dev.f.Close()
	delete(w.open, dev.path)
}

// readEnded handles a reader that stopped.
func (w *inputWatch) readEnded(e readEnd, now time.Time) {
	if e.dev.dropped.Load() {
		return
	}
	if w.open[e.dev.path] == e.dev {
		delete(w.open, e.dev.path)
	}
	e.dev.f.Close()
	err := e.err
	if errors.Is(err, io.EOF) {
		err = errors.New("end of file: the device went away")
	}
	msg := failureMessage(e.dev.path, err)
	w.log.Warn("input device dropped", "device", e.dev.path, "err", msg, "retry_in", w.cfg.RetryFailed)
	w.failed[e.dev.path] = failure{info: e.dev.info, at: now, msg: msg}
	w.updateReady()
}

// failureMessage is err's text, naming the device if err does not.
func failureMessage(path string, err error) string {
	msg := err.Error()
	if !strings.Contains(msg, path) {
		msg = path + ": " + msg
	}
	return msg
}

func (w *inputWatch) updateReady() {
	ready, reason := len(w.open) > 0, ""
	if !ready {
		reason = "no readable input devices matching " + w.cfg.Glob
		paths := make([]string, 0, len(w.failed))
		for p := range w.failed {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		if len(paths) > 0 {
			reason += " (" + w.failed[paths[0]].msg + ")"
		}
	}
	if w.ready != nil && *w.ready == ready && w.reason == reason {
		return
	}
	w.ready, w.reason = &ready, reason
	w.sink.SetReady(SourceInputDevices, ready, reason)
	if ready && w.lastInput.CompareAndSwap(0, time.Now().UnixNano()) {
		// No input seen yet: the watcher's start counts as the owner's
		// last input, so lending waits a full idle_after from now rather
		// than starting the moment the devices open.
		w.report()
	}
	if ready {
		w.log.Info("input devices readable", "devices", len(w.open))
	} else {
		w.log.Warn("input devices not ready", "reason", reason)
	}
}

// read reads one device until it fails or is closed.
func (w *inputWatch) read(dev *device) {
	defer w.wg.Done()
	buf := make([]byte, 64*InputEventSize)
	n := 0
	for {
		m, err := dev.f.Read(buf[n:])
		if m > 0 {
			n += m
			input, used := scanInputEvents(buf[:n])
			n = copy(buf, buf[used:n])
			if input {
				w.lastInput.Store(time.Now().UnixNano())
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
		}
		if err != nil {
			select {
			case w.ended <- readEnd{dev, err}:
			case <-w.done:
			}
			return
		}
	}
}

func (w *inputWatch) closeAll() {
	for _, dev := range w.open {
		w.drop(dev)
	}
	w.wg.Wait()
}
