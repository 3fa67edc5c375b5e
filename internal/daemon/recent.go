package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// recentSize is how many warnings and errors diagnostics keep.
const recentSize = 50

// recentEntry is one remembered warning or error.
type recentEntry struct {
	Time    time.Time      `json:"time"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Attrs   map[string]any `json:"attrs,omitempty"`
}

// recent remembers the latest warnings and errors for /admin/diagnostics.
// Attribute values are rendered through slog, so secrets keep their
// redaction.
type recent struct {
	mu      sync.Mutex
	entries []recentEntry
	next    int
	full    bool
}

func (r *recent) add(e recentEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = make([]recentEntry, recentSize)
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % recentSize
	r.full = r.full || r.next == 0
}

// list returns the remembered entries, oldest first.
func (r *recent) list() []recentEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]recentEntry{}, r.entries[:r.next]...)
	}
	return append(append([]recentEntry{}, r.entries[r.next:]...), r.entries[:r.next]...)
}

// recordingHandler passes every record on and remembers warnings and errors.
type recordingHandler struct {
	slog.Handler
	rec   *recent
	attrs []slog.Attr
}

func (h *recordingHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		e := recentEntry{Time: rec.Time, Level: rec.Level.String(), Message: rec.Message, Attrs: map[string]any{}}
		add := func(a slog.Attr) bool {
			e.Attrs[a.Key] = a.Value.Resolve().String()
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		rec.Attrs(add)
		h.rec.add(e)
	}
	return h.Handler.Handle(ctx, rec)
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithAttrs(as), rec: h.rec, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *recordingHandler) WithGroup(name string) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithGroup(name), rec: h.rec, attrs: h.attrs}
}
