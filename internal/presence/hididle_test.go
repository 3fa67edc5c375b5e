package presence

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A trimmed `ioreg -c IOHIDSystem -d 4` from macOS 14.
const ioregSample = `+-o Root  <class IORegistryEntry, id 0x100000100, retain 31>
  +-o J314sAP  <class IOPlatformExpertDevice, id 0x100000245, registered, matched, active, busy 0 (6210 ms), retain 41>
    +-o IOResources  <class IOResources, id 0x100000110, registered, matched, active, busy 0 (0 ms), retain 102>
      +-o IOHIDSystem  <class IOHIDSystem, id 0x1000005c9, registered, matched, active, busy 0 (0 ms), retain 20>
          {
            "IOClass" = "IOHIDSystem"
            "HIDParameters" = {"HIDClickTime"=500000000,"HIDKeyRepeat"=83333333}
            "HIDIdleTime" = 8427016125
            "IOProviderClass" = "IOResources"
          }
`

func TestParseHIDIdleTime(t *testing.T) {
	got, err := ParseHIDIdleTime([]byte(ioregSample))
	if err != nil || got != 8427016125*time.Nanosecond {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", `"HIDIdleTime"`, `"HIDIdleTime" = x`, `"HIDIdleTime" 5`} {
		if _, err := ParseHIDIdleTime([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got, err := ParseHIDIdleTime([]byte(`"HIDIdleTime" = 99999999999999999999999`)); err != nil || got != maxIdle {
		t.Errorf("huge value: %v, %v", got, err)
	}
}

func FuzzParseHIDIdleTime(f *testing.F) {
	f.Add([]byte(ioregSample))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseHIDIdleTime(b); err == nil && (d < 0 || d > maxIdle) {
			t.Fatalf("idle %v out of range", d)
		}
	})
}

// HIDIdle reports the last input ioreg implies, again only when it moves,
// and is not ready while ioreg fails.
func TestHIDIdleRun(t *testing.T) {
	var idle atomic.Int64
	idle.Store(int64(5 * time.Second))
	var fail atomic.Bool
	read := func(context.Context) ([]byte, error) {
		if fail.Load() {
			return nil, errors.New(`exec: "ioreg": executable file not found in $PATH`)
		}
		return []byte(strings.Replace(ioregSample, "8427016125", strconv.FormatInt(idle.Load(), 10), 1)), nil
	}
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&HIDIdle{Interval: 5 * time.Millisecond, Read: read}).Run(ctx, sink) }()
	defer func() { cancel(); <-done }()

	_, next := sink.waitFor(t, 0, "ready", isReady(SourceHIDIdle, true))
	before := time.Now()
	c, next := sink.waitFor(t, next, "last input", isActivity(SourceHIDIdle))
	// The report was read before the ready call was seen, so its last
	// input is at least the 5 s ioreg said before that moment.
	if d := before.Sub(c.activity.LastInput); d < 5*time.Second {
		t.Fatalf("last input %v before the read, want at least 5s", d)
	}
	idle.Store(0) // the owner touched the machine
	sink.waitFor(t, next, "the new input", func(x call) bool {
		return x.kind == "activity" && x.activity.LastInput.After(c.activity.LastInput.Add(4*time.Second))
	})
	fail.Store(true)
	c, _ = sink.waitFor(t, next, "not ready", isReady(SourceHIDIdle, false))
	if !strings.Contains(c.reason, "ioreg") {
		t.Fatalf("reason %q", c.reason)
	}
}
