package presence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// These tests feed named pipes with real struct input_event records, the
// bytes an evdev device delivers, and watch them as the service watches
// /dev/input/event*.

// fakeDevice is a named pipe standing in for an input device. Its writing
// end is opened read-write, which never blocks and keeps the pipe alive
// while the watcher opens and closes its end.
type fakeDevice struct {
	path string
	w    *os.File
}

func newFakeDevice(t *testing.T, dir, name string) *fakeDevice {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	d := &fakeDevice{path: path}
	d.open(t)
	t.Cleanup(func() { d.close() })
	return d
}

func (d *fakeDevice) open(t *testing.T) {
	t.Helper()
	w, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.w = w
}

func (d *fakeDevice) close() {
	if d.w != nil {
		d.w.Close()
		d.w = nil
	}
}

func (d *fakeDevice) write(t *testing.T, events ...InputEvent) {
	t.Helper()
	var b []byte
	for _, e := range events {
		b = e.Append(b)
	}
	d.writeBytes(t, b)
}

func (d *fakeDevice) writeBytes(t *testing.T, b []byte) {
	t.Helper()
	if _, err := d.w.Write(b); err != nil {
		t.Fatal(err)
	}
}

// drained waits until the watcher has read everything written so far.
func (d *fakeDevice) drained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		var n int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, d.w.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
			t.Fatal(errno)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes never read", d.path, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// keyPress is what a keyboard sends for one key going down.
func keyPress() []InputEvent {
	now := time.Now()
	return []InputEvent{NewInputEvent(now, EvMsc, 4, 30), NewInputEvent(now, EvKey, 30, 1), NewInputEvent(now, EvSyn, 0, 0)}
}

func startInputDevices(t *testing.T, d *InputDevices) *recSink {
	t.Helper()
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(hang):
			t.Errorf("Run did not return after its context ended")
		}
	})
	return sink
}

// Key presses in a watched device are reported as the owner's input;
// sync and misc events alone are not; a record split across writes is
// still read whole.
func TestInputDevicesReportInput(t *testing.T) {
	dir := t.TempDir()
	dev := newFakeDevice(t, dir, "event0")
	sink := startInputDevices(t, &InputDevices{Glob: filepath.Join(dir, "event*"), Rescan: 20 * time.Millisecond})
	_, next := sink.waitFor(t, 0, "ready", isReady(SourceInputDevices, true))
	_, next = sink.waitFor(t, next, "the start counted as input", isActivity(SourceInputDevices))

	// Not input: a misc scan code and a sync report, read and ignored.
	now := time.Now()
	dev.write(t, NewInputEvent(now, EvMsc, 4, 30), NewInputEvent(now, EvSyn, 0, 0))
	dev.drained(t)

	before := time.Now()
	dev.write(t, keyPress()...)
	c, next := sink.waitFor(t, next, "a report of the key press", isActivity(SourceInputDevices))
	if c.activity.LastInput.Before(before) {
		t.Fatalf("first report's last input %v is before the key press was written (%v): sync/misc events were taken for input", c.activity.LastInput, before)
	}
	if c.activity.Inhibited || !c.activity.Until.IsZero() {
		t.Fatalf("input report %v should be plain last input", c)
	}

	// Half a record, then the rest once the first half was read.
	mid := time.Now()
	rec := NewInputEvent(mid, EvRel, 0, 3).Append(nil)
	dev.writeBytes(t, rec[:10])
	dev.drained(t)
	dev.writeBytes(t, rec[10:])
	c2, _ := sink.waitFor(t, next, "a report of the split record", isActivity(SourceInputDevices))
	if !c2.activity.LastInput.After(c.activity.LastInput) || c2.activity.LastInput.Before(mid) {
		t.Fatalf("split record's report %v does not follow the first %v", c2, c)
	}
}

// A watcher that becomes ready before any input counts its start as the
// owner's last input: lending then waits a full idle_after from the start
// instead of beginning the moment the devices open.
func TestInputDevicesStartCountsAsInput(t *testing.T) {
	dir := t.TempDir()
	newFakeDevice(t, dir, "event0")
	start := time.Now()
	sink := startInputDevices(t, &InputDevices{Glob: filepath.Join(dir, "event*"), Rescan: 20 * time.Millisecond})
	_, next := sink.waitFor(t, 0, "ready", isReady(SourceInputDevices, true))
	c, _ := sink.waitFor(t, next, "the start counted as input", isActivity(SourceInputDevices))
	if c.activity.LastInput.Before(start) || c.activity.LastInput.After(time.Now()) {
		t.Fatalf("start report's last input %v, want the watcher's start (after %v)", c.activity.LastInput, start)
	}
}

// With no device matching the glob the source is not ready and says so; a
// device that appears (hot-plug) is picked up and makes it ready.
func TestInputDevicesNoDevicesThenHotplug(t *testing.T) {
	dir := t.TempDir()
	glob := filepath.Join(dir, "event*")
	sink := startInputDevices(t, &InputDevices{Glob: glob, Rescan: 20 * time.Millisecond})
	c, next := sink.waitFor(t, 0, "not ready", isReady(SourceInputDevices, false))
	if c.reason != "no readable input devices matching "+glob {
		t.Fatalf("reason %q", c.reason)
	}
	dev := newFakeDevice(t, dir, "event7")
	_, next = sink.waitFor(t, next, "ready after hot-plug", isReady(SourceInputDevices, true))
	dev.write(t, keyPress()...)
	sink.waitFor(t, next, "input from the hot-plugged device", isActivity(SourceInputDevices))
}

// A device whose read fails is dropped and the failure shows in the
// readiness reason; once it reads again it is watched again.
func TestInputDevicesDropFailingDevice(t *testing.T) {
	dir := t.TempDir()
	glob := filepath.Join(dir, "event*")
	dev := newFakeDevice(t, dir, "event0")
	sink := startInputDevices(t, &InputDevices{Glob: glob, Rescan: 20 * time.Millisecond, RetryFailed: 20 * time.Millisecond})
	_, next := sink.waitFor(t, 0, "ready", isReady(SourceInputDevices, true))

	dev.close() // the watcher's read now ends: the device went away
	c, next := sink.waitFor(t, next, "not ready after the device failed", isReady(SourceInputDevices, false))
	if !strings.HasPrefix(c.reason, "no readable input devices matching "+glob+" (") || !strings.Contains(c.reason, dev.path) {
		t.Fatalf("reason %q should name the glob and the failed device", c.reason)
	}

	dev.open(t)
	dev.write(t, keyPress()...)
	sink.waitFor(t, next, "input once the device works again", isActivity(SourceInputDevices))
}

// A node that opens but cannot be read (here a directory) is dropped, and
// the readiness reason says why.
func TestInputDevicesUnreadableNodeLeftOut(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "event1"), 0o755); err != nil {
		t.Fatal(err)
	}
	sink := startInputDevices(t, &InputDevices{Glob: filepath.Join(dir, "event*"), Rescan: 20 * time.Millisecond})
	c, _ := sink.waitFor(t, 0, "not ready", func(c call) bool {
		return c.kind == "ready" && !c.ready && strings.Contains(c.reason, "is a directory")
	})
	if !strings.Contains(c.reason, filepath.Join(dir, "event1")) {
		t.Fatalf("reason %q should name the node", c.reason)
	}
}

// An invalid glob is an error, and the source says it is not ready.
func TestInputDevicesBadGlob(t *testing.T) {
	sink := newSink()
	err := (&InputDevices{Glob: "/dev/input/[event"}).Run(context.Background(), sink)
	if err == nil {
		t.Fatal("Run accepted an invalid glob")
	}
	if calls := sink.snapshot(); len(calls) != 1 || calls[0].ready {
		t.Fatalf("calls %v", calls)
	}
}
