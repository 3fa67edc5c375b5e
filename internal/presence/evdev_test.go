package presence

import (
	"bytes"
	"testing"
	"time"
)

// A record survives encoding and decoding, and is exactly the kernel's size.
func TestInputEventRoundTrip(t *testing.T) {
	if InputEventSize != 24 && wordSize == 8 {
		t.Fatalf("struct input_event is 24 bytes on 64-bit systems, got %d", InputEventSize)
	}
	e := InputEvent{Sec: 1_700_000_000, Usec: 123456, Type: EvKey, Code: 30, Value: 1}
	b := e.Append(nil)
	if len(b) != InputEventSize {
		t.Fatalf("encoded %d bytes, want %d", len(b), InputEventSize)
	}
	if got := DecodeInputEvent(b); got != e {
		t.Fatalf("decoded %+v, want %+v", got, e)
	}
	// The layout is the kernel's: timeval, then type, code, value (little-endian).
	want := []byte{0x01, 0x00, 0x1e, 0x00, 0x01, 0x00, 0x00, 0x00}
	if !bytes.Equal(b[2*wordSize:], want) {
		t.Fatalf("type/code/value bytes % x, want % x", b[2*wordSize:], want)
	}
}

// Only keys, buttons and motion are the owner's input.
func TestOwnerInputTypes(t *testing.T) {
	for typ, want := range map[uint16]bool{EvSyn: false, EvKey: true, EvRel: true, EvAbs: true, EvMsc: false, 0x05: false, 0x11: false, 0x15: false} {
		if got := (InputEvent{Type: typ}).OwnerInput(); got != want {
			t.Errorf("type %#x: OwnerInput %v, want %v", typ, got, want)
		}
	}
}

// scanInputEvents consumes whole records only and finds input among them.
func TestScanInputEvents(t *testing.T) {
	now := time.Now()
	var b []byte
	b = NewInputEvent(now, EvMsc, 4, 458756).Append(b)
	b = NewInputEvent(now, EvSyn, 0, 0).Append(b)
	if input, used := scanInputEvents(b); input || used != 2*InputEventSize {
		t.Fatalf("sync and misc: input=%v used=%d", input, used)
	}
	b = NewInputEvent(now, EvRel, 0, 5).Append(b)
	partial := append(b, make([]byte, InputEventSize-1)...)
	if input, used := scanInputEvents(partial); !input || used != 3*InputEventSize {
		t.Fatalf("with motion and a partial record: input=%v used=%d", input, used)
	}
}

func FuzzScanInputEvents(f *testing.F) {
	f.Add(NewInputEvent(time.Unix(1, 0), EvKey, 30, 1).Append(nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, used := scanInputEvents(b)
		if used%InputEventSize != 0 || used > len(b) || len(b)-used >= InputEventSize {
			t.Fatalf("used %d of %d", used, len(b))
		}
	})
}

// The first input after a quiet spell is reported at once; input within the
// coalescing gap waits for one flush; nothing is lost.
func TestCoalescer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := coalescer{every: 250 * time.Millisecond}
	if report, _ := c.input(t0); !report {
		t.Fatal("first input not reported at once")
	}
	report, at := c.input(t0.Add(10 * time.Millisecond))
	if report || !at.Equal(t0.Add(250*time.Millisecond)) {
		t.Fatalf("input within the gap: report=%v flushAt=%v", report, at)
	}
	if report, at := c.input(t0.Add(20 * time.Millisecond)); report || !at.IsZero() {
		t.Fatalf("second input within the gap: report=%v flushAt=%v (one flush is already due)", report, at)
	}
	if !c.flush(t0.Add(250 * time.Millisecond)) {
		t.Fatal("held input not flushed")
	}
	if c.flush(t0.Add(260 * time.Millisecond)) {
		t.Fatal("flushed twice")
	}
	// Within the gap after the flush: held again.
	if report, at := c.input(t0.Add(300 * time.Millisecond)); report || at.IsZero() {
		t.Fatal("input right after a flush not held")
	}
	c.flush(t0.Add(500 * time.Millisecond))
	// After a quiet spell: at once again.
	if report, _ := c.input(t0.Add(2 * time.Second)); !report {
		t.Fatal("input after a quiet spell not reported at once")
	}
	// A clock that went back does not hold input for ever.
	if report, _ := c.input(t0); !report {
		t.Fatal("input after the clock went back was held")
	}
}
