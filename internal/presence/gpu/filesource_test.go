package gpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startFile runs a FileSource on path until the test ends.
func startFile(t *testing.T, path string, o FileOptions) *recordingSink {
	t.Helper()
	sink := newSink()
	if o.Settle == 0 {
		o.Settle = 10 * time.Millisecond
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Hour // changes must be seen by notification
	}
	src := NewFileSource(sink, path, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return sink
}

func fileReady(s state) (readiness, bool) {
	r, ok := s.ready[SourcePressureFile]
	return r, ok
}

// filePressure waits for the file source to be ready with the given
// verdict on resource key ("" is every resource).
func filePressure(res string, active bool, reason string) func(state) bool {
	return func(s state) bool {
		r, ok := fileReady(s)
		p, seen := s.pressure[SourcePressureFile+"/"+res]
		return ok && r.ready && seen && p.Active == active && p.Reason == reason
	}
}

func fileNotReady(prefix string) func(state) bool {
	return func(s state) bool {
		r, ok := fileReady(s)
		return ok && !r.ready && strings.HasPrefix(r.reason, prefix)
	}
}

func writeState(t *testing.T, path, content string) {
	t.Helper()
	writeAtomic(t, path, content)
}

func TestStateFileLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu-pressure.json")
	sink := startFile(t, path, FileOptions{Resources: []string{"gpu0", "gpu1"}})

	// A missing file claims nothing: ready, no pressure.
	sink.waitFor(t, "missing file: ready, no pressure", filePressure("", false, ""))

	// Written atomically (a rename into place).
	writeState(t, path, `{"pressure": true, "reason": "rendering"}`)
	sink.waitFor(t, "pressure from a renamed file", filePressure("", true, "state file: rendering"))

	// Rewritten in place.
	if err := os.WriteFile(path, []byte(`{"pressure": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "pressure cleared by an in-place write", filePressure("", false, ""))

	// Malformed: not ready, with the parser's reason.
	writeState(t, path, `{"pressure": true, "colour": "red"}`)
	sink.waitFor(t, "malformed", fileNotReady(`malformed: unknown key "colour"`))

	// Fixed again.
	writeState(t, path, `{"pressure": true}`)
	sink.waitFor(t, "ready after the fix", filePressure("", true, "state file"))

	// Stale: expired before it was read.
	writeState(t, path, `{"pressure": false, "expires": "2020-01-01T00:00:00Z"}`)
	sink.waitFor(t, "stale", fileNotReady("stale since 2020-01-01T00:00:00Z"))

	// Deleted: back to no pressure.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "deleted: ready, no pressure", filePressure("", false, ""))
}

func TestStateFileResourceSwitchClearsTheOldOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	writeState(t, path, `{"pressure": true, "reason": "game", "resource": "gpu1"}`)
	sink := startFile(t, path, FileOptions{Resources: []string{"gpu0", "gpu1"}})
	s := sink.waitFor(t, "pressure on gpu1", filePressure("gpu1", true, "state file: game"))
	if p := s.pressure[SourcePressureFile+"/"]; p.Active {
		t.Errorf("every resource under pressure although the file names gpu1: %+v", p)
	}
	writeState(t, path, `{"pressure": true, "reason": "game", "resource": "gpu0"}`)
	sink.waitFor(t, "gpu0 on, gpu1 cleared", func(s state) bool {
		return filePressure("gpu0", true, "state file: game")(s) && !s.pressure[SourcePressureFile+"/gpu1"].Active
	})
	writeState(t, path, `{"pressure": true, "resource": "gpu9"}`)
	sink.waitFor(t, "unknown resource", fileNotReady(`malformed: "resource": no resource "gpu9" is configured`))
}

// A file that expires while it is being watched turns stale at that time,
// with no further write.
func TestStateFileExpiresWhileWatched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	exp := time.Now().Add(300 * time.Millisecond).UTC()
	writeState(t, path, fmt.Sprintf(`{"pressure": true, "reason": "short job", "expires": %q}`, exp.Format(time.RFC3339Nano)))
	sink := startFile(t, path, FileOptions{})
	sink.waitFor(t, "pressure before expiry", func(s state) bool {
		return filePressure("", true, "state file: short job")(s) || fileNotReady("stale since")(s)
	})
	sink.waitFor(t, "stale after expiry", fileNotReady("stale since "+exp.Format(time.RFC3339)))
}

// A directory that does not exist yet is found by the slow poll, and from
// then on changes are seen by notification.
func TestStateFileDirectoryCreatedLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "p.json")
	sink := startFile(t, path, FileOptions{PollInterval: 20 * time.Millisecond})
	sink.waitFor(t, "no directory: ready, no pressure", filePressure("", false, ""))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeState(t, path, `{"pressure": true, "reason": "late"}`)
	sink.waitFor(t, "pressure once the directory exists", filePressure("", true, "state file: late"))
}

// A writer that truncates and then writes is read after it has finished,
// not as an empty, malformed file in between.
func TestStateFileTruncatingWriterIsReadWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	writeState(t, path, `{"pressure": false}`)
	sink := startFile(t, path, FileOptions{Settle: 200 * time.Millisecond})
	sink.waitFor(t, "ready", filePressure("", false, ""))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"pressure": true, "reason": "echo"}`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := sink.waitFor(t, "pressure", filePressure("", true, "state file: echo"))
	for _, e := range s.events {
		if strings.Contains(e, "malformed") {
			t.Errorf("read mid-write: %s", e)
		}
	}
}

func TestStateFileUnreadableIsNotReady(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := os.Mkdir(path, 0o755); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	sink := startFile(t, path, FileOptions{})
	sink.waitFor(t, "not ready", fileNotReady("unreadable: "))
}
