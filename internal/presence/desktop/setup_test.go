package desktop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// --source picks one source by name, auto keeps the order, and an unknown
// name is refused with the choices.
func TestSetupChoose(t *testing.T) {
	s := Setup{Candidates: []Candidate{{Name: "mutter"}, {Name: "x11"}}}
	if c, err := s.Choose(SourceAuto); err != nil || len(c) != 2 {
		t.Fatalf("auto: %v, %v", c, err)
	}
	if c, err := s.Choose("x11"); err != nil || len(c) != 1 || c[0].Name != "x11" {
		t.Fatalf("x11: %v, %v", c, err)
	}
	if _, err := s.Choose("wayland"); err == nil || !strings.Contains(err.Error(), "auto or one of mutter, x11") {
		t.Fatalf("unknown: %v", err)
	}
}

// This system's setup has the documented order.
func TestDefaultSetupOrder(t *testing.T) {
	got := strings.Join(Default(func(string) (string, bool) { return "", false }).Names(), ",")
	if want := defaultOrder; got != want {
		t.Fatalf("sources %s, want %s", got, want)
	}
}

// Windows' tick counter wraps every 49.7 days; idle time survives the wrap.
func TestIdleFromTicks(t *testing.T) {
	if got := idleFromTicks(10_000, 4_000); got != 6*time.Second {
		t.Fatalf("got %v", got)
	}
	if got := idleFromTicks(1_000, 0xFFFF_FC18); got != 2*time.Second { // last input 1 s before the wrap
		t.Fatalf("across the wrap: got %v", got)
	}
	if !displayRequired(0x80000002) || displayRequired(0x80000001) {
		t.Fatal("ES_DISPLAY_REQUIRED misread")
	}
}

const pmsetSample = `2026-11-20 10:00:00 +0100
Assertion status system-wide:
   BackgroundTask                 0
   ApplePushServiceTask           0
   UserIsActive                   1
   PreventUserIdleDisplaySleep    1
   PreventSystemSleep             0
   PreventUserIdleSystemSleep     1
Listed by owning process:
   pid 512(zoom.us): [0x0000a1b2] 00:12:04 PreventUserIdleDisplaySleep named: "Zoom is in a meeting"
`

func TestParsePMSetAssertions(t *testing.T) {
	if on, err := parsePMSetAssertions([]byte(pmsetSample)); err != nil || !on {
		t.Fatalf("got %v, %v", on, err)
	}
	off := strings.Replace(pmsetSample, "PreventUserIdleDisplaySleep    1", "PreventUserIdleDisplaySleep    0", 1)
	if on, err := parsePMSetAssertions([]byte(off)); err != nil || on {
		t.Fatalf("off: got %v, %v", on, err)
	}
	if _, err := parsePMSetAssertions([]byte("garbage")); err == nil {
		t.Fatal("garbage: no error")
	}
}

func FuzzParsePMSetAssertions(f *testing.F) {
	f.Add([]byte(pmsetSample))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parsePMSetAssertions(b) })
}

// The macOS source and checker read what the commands print.
func TestMacOSSourceAndChecker(t *testing.T) {
	ioreg := func(context.Context) ([]byte, error) { return []byte(`  "HIDIdleTime" = 2500000000` + "\n"), nil }
	src, err := MacOS(ioreg).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if idle, err := src.Idle(context.Background()); err != nil || idle != 2500*time.Millisecond {
		t.Fatalf("idle %v, %v", idle, err)
	}
	pmset := func(context.Context) ([]byte, error) { return []byte(pmsetSample), nil }
	if on, err := PMSet(pmset).Inhibited(context.Background()); err != nil || !on {
		t.Fatalf("inhibited %v, %v", on, err)
	}
}

// logind's hints become an idle time: not idle is in use; idle counts from
// IdleSinceHint.
func TestLogindIdle(t *testing.T) {
	now := time.Unix(2_000_000_000, 0)
	props := func(hint bool, since uint64) map[string]dbus.Variant {
		return map[string]dbus.Variant{"IdleHint": dbus.MakeVariant(hint), "IdleSinceHint": dbus.MakeVariant(since)}
	}
	if d, err := logindIdle(props(false, 0), now); err != nil || d != 0 {
		t.Fatalf("not idle: %v, %v", d, err)
	}
	if d, err := logindIdle(props(true, uint64(now.Add(-7*time.Minute).UnixMicro())), now); err != nil || d != 7*time.Minute {
		t.Fatalf("idle: %v, %v", d, err)
	}
	if d, err := logindIdle(props(true, uint64(now.Add(time.Minute).UnixMicro())), now); err != nil || d != 0 {
		t.Fatalf("idle since the future: %v, %v", d, err)
	}
	if _, err := logindIdle(map[string]dbus.Variant{}, now); err == nil {
		t.Fatal("no hint: no error")
	}
	if _, err := logindIdle(props(true, 0), now); err == nil {
		t.Fatal("idle without a time: no error")
	}
}

// Only the owner's own blocking idle locks are presence.
func TestIdleBlocked(t *testing.T) {
	const me = 1000
	for _, tc := range []struct {
		in   Inhibitor
		want bool
	}{
		{Inhibitor{What: "idle", Mode: "block", UID: me}, true},
		{Inhibitor{What: "sleep:idle", Mode: "block", UID: me}, true},
		{Inhibitor{What: "idle", Mode: "delay", UID: me}, false},
		{Inhibitor{What: "sleep:shutdown", Mode: "block", UID: me}, false},
		{Inhibitor{What: "idle", Mode: "block", UID: 0}, false},
		{Inhibitor{What: "handle-lid-switch:idleish", Mode: "block", UID: me}, false},
	} {
		if got := idleBlocked([]Inhibitor{tc.in}, me); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.in, got, tc.want)
		}
	}
}
