package presence

import (
	"encoding/binary"
	"time"
)

// Linux input event types (linux/input-event-codes.h) that matter here.
const (
	EvSyn uint16 = 0x00
	EvKey uint16 = 0x01
	EvRel uint16 = 0x02
	EvAbs uint16 = 0x03
	EvMsc uint16 = 0x04
)

// wordSize is the size of a C long, which struct timeval is made of.
const wordSize = (32 << (^uint(0) >> 63)) / 8

// InputEventSize is the size of a Linux struct input_event on this
// platform: a struct timeval (two longs: 16 bytes on 64-bit systems), then
// type (u16), code (u16) and value (s32). 24 bytes on 64-bit systems.
const InputEventSize = 2*wordSize + 8

// InputEvent is one Linux struct input_event, as an evdev device delivers it.
type InputEvent struct {
	Sec, Usec int64
	Type      uint16
	Code      uint16
	Value     int32
}

// OwnerInput reports whether the event is the owner touching the machine: a
// key or button (EV_KEY), relative motion (EV_REL: a mouse, a wheel) or
// absolute motion (EV_ABS: a touchpad, a tablet, a joystick). Sync,
// miscellaneous, switch, LED and other events are not input.
func (e InputEvent) OwnerInput() bool {
	return e.Type == EvKey || e.Type == EvRel || e.Type == EvAbs
}

// Append appends the event as the kernel writes it: native byte order
// (little-endian on every platform vacancyd ships for) and native word size.
// Tests use it to feed pipes that stand in for devices.
func (e InputEvent) Append(b []byte) []byte {
	if wordSize == 8 {
		b = binary.NativeEndian.AppendUint64(b, uint64(e.Sec))
		b = binary.NativeEndian.AppendUint64(b, uint64(e.Usec))
	} else {
		b = binary.NativeEndian.AppendUint32(b, uint32(e.Sec))
		b = binary.NativeEndian.AppendUint32(b, uint32(e.Usec))
	}
	b = binary.NativeEndian.AppendUint16(b, e.Type)
	b = binary.NativeEndian.AppendUint16(b, e.Code)
	return binary.NativeEndian.AppendUint32(b, uint32(e.Value))
}

// NewInputEvent returns an event stamped with t.
func NewInputEvent(t time.Time, typ, code uint16, value int32) InputEvent {
	return InputEvent{Sec: t.Unix(), Usec: int64(t.Nanosecond() / 1000), Type: typ, Code: code, Value: value}
}

// DecodeInputEvent decodes one record; b must hold at least InputEventSize
// bytes.
func DecodeInputEvent(b []byte) InputEvent {
	var e InputEvent
	if wordSize == 8 {
		e.Sec = int64(binary.NativeEndian.Uint64(b[0:]))
		e.Usec = int64(binary.NativeEndian.Uint64(b[8:]))
	} else {
		e.Sec = int64(int32(binary.NativeEndian.Uint32(b[0:])))
		e.Usec = int64(int32(binary.NativeEndian.Uint32(b[4:])))
	}
	t := b[2*wordSize:]
	e.Type = binary.NativeEndian.Uint16(t[0:])
	e.Code = binary.NativeEndian.Uint16(t[2:])
	e.Value = int32(binary.NativeEndian.Uint32(t[4:]))
	return e
}

// scanInputEvents reads the complete records at the start of b and reports
// whether any is owner input, and how many bytes it consumed (a partial
// record at the end is left for the next read).
func scanInputEvents(b []byte) (input bool, used int) {
	for len(b)-used >= InputEventSize {
		if DecodeInputEvent(b[used:]).OwnerInput() {
			input = true
		}
		used += InputEventSize
	}
	return input, used
}

// coalescer limits how often input is reported without delaying the report
// that matters: the first input after a quiet spell is reported at once
// (that is what reclaims the GPU), later input within every is held and
// reported once when every has passed since the last report.
type coalescer struct {
	every    time.Duration
	lastSent time.Time
	pending  bool
}

// input is called for input at now. It returns report=true when the input
// should be reported at once; otherwise, when flushAt is not zero, the
// caller should call flush at flushAt (a flush already scheduled stays
// scheduled and flushAt is zero).
func (c *coalescer) input(now time.Time) (report bool, flushAt time.Time) {
	if c.lastSent.IsZero() || now.Sub(c.lastSent) >= c.every || now.Before(c.lastSent) {
		c.lastSent = now
		c.pending = false
		return true, time.Time{}
	}
	if c.pending {
		return false, time.Time{}
	}
	c.pending = true
	return false, c.lastSent.Add(c.every)
}

// flush is called when a scheduled flush is due; it reports whether input is
// waiting to be reported.
func (c *coalescer) flush(now time.Time) bool {
	if !c.pending {
		return false
	}
	c.pending = false
	c.lastSent = now
	return true
}
