package desktop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/presence/desktop/desktoptest"
)

// These run against a real dbus-daemon on a private bus, with fakes of the
// desktop's services on it.

func open(t *testing.T, c Candidate) IdleSource {
	t.Helper()
	src, err := c.Open(context.Background())
	if err != nil {
		t.Fatalf("open %s: %v", c.Name, err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func idle(t *testing.T, src IdleSource) time.Duration {
	t.Helper()
	d, err := src.Idle(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", src.Name(), err)
	}
	return d
}

// Mutter's idle time is read in milliseconds; once the user has been idle a
// while the source asks Mutter for a user-active watch, and its firing
// reaches the reporter as activity.
func TestMutterSource(t *testing.T) {
	addr := desktoptest.StartBus(t)
	m := desktoptest.ServeMutter(t, addr, 1500)
	src := open(t, Mutter(BusAt(addr)))
	if d := idle(t, src); d != 1500*time.Millisecond {
		t.Fatalf("idle %v", d)
	}
	if waiting, asked := m.Armed(); asked != 0 || waiting != 0 {
		t.Fatalf("watch asked for after 1.5 s idle (asked %d)", asked)
	}

	m.SetIdle(600_000)
	if d := idle(t, src); d != 10*time.Minute {
		t.Fatalf("idle %v", d)
	}
	idle(t, src) // armed already: no second watch
	if waiting, asked := m.Armed(); waiting != 1 || asked != 1 {
		t.Fatalf("watches waiting %d, asked %d; want one", waiting, asked)
	}
	if n := m.Input(t, 20); n != 1 {
		t.Fatalf("%d watches fired", n)
	}
	select {
	case <-src.(Notifier).Activity():
	case <-time.After(hang):
		t.Fatal("the fired watch did not reach the source")
	}
	if d := idle(t, src); d != 20*time.Millisecond {
		t.Fatalf("idle after input %v", d)
	}
	// After the next pause a new watch is armed.
	m.SetIdle(5000)
	idle(t, src)
	if waiting, asked := m.Armed(); waiting != 1 || asked != 2 {
		t.Fatalf("after a new pause: waiting %d, asked %d", waiting, asked)
	}
}

// Without Mutter on the bus the candidate fails and Select moves on to the
// screensaver interface, found at older KDE's /ScreenSaver path.
func TestSelectFallsBackToScreenSaver(t *testing.T) {
	addr := desktoptest.StartBus(t)
	ms := desktoptest.NewValue[uint32](42_000)
	desktoptest.ServeScreenSaver(t, addr, "/ScreenSaver", ms)
	src, err := Select(context.Background(), []Candidate{Mutter(BusAt(addr)), ScreenSaver(BusAt(addr))})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Name() != "screensaver" {
		t.Fatalf("selected %s", src.Name())
	}
	if d := idle(t, src); d != 42*time.Second {
		t.Fatalf("idle %v", d)
	}
	ms.Set(0)
	if d := idle(t, src); d != 0 {
		t.Fatalf("idle %v", d)
	}
}

// logind: a reporter in a systemd user unit has no session of its own, so
// the user's graphical session (Display) is read; its idle hints become the
// idle time. Inhibitor locks count only when they block idleness and are
// the user's.
func TestLogindSourceAndInhibitors(t *testing.T) {
	addr := desktoptest.StartBus(t)
	const uid = 1000
	l := desktoptest.ServeLogind(t, addr, uid)
	src := open(t, Logind(BusAt(addr), LogindSession{SessionID: "c7", PID: 4242, UID: uid}))
	if d := idle(t, src); d != 0 {
		t.Fatalf("a session not idle reads idle %v", d)
	}
	since := time.Now().Add(-3 * time.Minute)
	l.SetIdle(true, uint64(since.UnixMicro()))
	if d := idle(t, src); d < 3*time.Minute {
		t.Fatalf("idle %v, want 3 min or more", d)
	}

	if _, err := Logind(BusAt(addr), LogindSession{UID: 4}).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "no logind session") {
		t.Fatalf("unknown user: %v", err)
	}

	bus := NewBus(BusAt(addr))
	defer bus.Close()
	check := LogindInhibitors(bus, uid)
	if on, err := check.Inhibited(context.Background()); err != nil || on {
		t.Fatalf("no locks: %v, %v", on, err)
	}
	l.SetInhibitors(
		desktoptest.Inhibitor{What: "idle", Who: "backup", Why: "a system job", Mode: "block", UID: 0, PID: 1},
		desktoptest.Inhibitor{What: "sleep", Who: "firefox", Why: "playing video", Mode: "block", UID: uid, PID: 2},
	)
	if on, err := check.Inhibited(context.Background()); err != nil || on {
		t.Fatalf("others' and non-idle locks: %v, %v", on, err)
	}
	l.SetInhibitors(desktoptest.Inhibitor{What: "sleep:idle", Who: "zoom", Why: "in a meeting", Mode: "block", UID: uid, PID: 3})
	if on, err := check.Inhibited(context.Background()); err != nil || !on {
		t.Fatalf("the owner's idle lock: %v, %v", on, err)
	}
}

// GNOME's session manager and org.freedesktop.PowerManagement answer
// whether idleness is inhibited; an absent service is an error, not a "no".
func TestSessionInhibitors(t *testing.T) {
	addr := desktoptest.StartBus(t)
	bus := NewBus(BusAt(addr))
	defer bus.Close()
	gnome, power := GnomeSession(bus), PowerManagement(bus)
	if _, err := gnome.Inhibited(context.Background()); err == nil {
		t.Fatal("absent GNOME session manager: no error")
	}
	flags := desktoptest.NewValue[uint32](4) // suspend only
	desktoptest.ServeGnomeSession(t, addr, flags)
	if on, err := gnome.Inhibited(context.Background()); err != nil || on {
		t.Fatalf("suspend inhibited only: %v, %v", on, err)
	}
	flags.Set(4 | 8)
	if on, err := gnome.Inhibited(context.Background()); err != nil || !on {
		t.Fatalf("idle inhibited: %v, %v", on, err)
	}
	held := desktoptest.NewValue(true)
	desktoptest.ServePowerManagement(t, addr, held)
	if on, err := power.Inhibited(context.Background()); err != nil || !on {
		t.Fatalf("power management: %v, %v", on, err)
	}
}

// A Bus whose connection broke connects again on the next call.
func TestBusReconnects(t *testing.T) {
	addr := desktoptest.StartBus(t)
	desktoptest.ServePowerManagement(t, addr, desktoptest.NewValue(false))
	bus := NewBus(BusAt(addr))
	defer bus.Close()
	check := PowerManagement(bus)
	if _, err := check.Inhibited(context.Background()); err != nil {
		t.Fatal(err)
	}
	bus.mu.Lock()
	bus.conn.Close()
	bus.mu.Unlock()
	if _, err := check.Inhibited(context.Background()); err != nil {
		t.Fatalf("after the connection broke: %v", err)
	}
}

// End to end over the private bus: the reporter picks Mutter, reports its
// idle time, and reports the user's return as soon as Mutter signals it.
func TestReporterWithMutter(t *testing.T) {
	addr := desktoptest.StartBus(t)
	m := desktoptest.ServeMutter(t, addr, 120_000)
	flags := desktoptest.NewValue[uint32](0)
	desktoptest.ServeGnomeSession(t, addr, flags)
	s := newSender()
	bus := NewBus(BusAt(addr))
	runReporter(t, &Reporter{
		Candidates: []Candidate{Mutter(BusAt(addr)), ScreenSaver(BusAt(addr))},
		Inhibitors: []InhibitChecker{GnomeSession(bus)},
		Sender:     s,
		Interval:   time.Hour,
		sample:     time.Hour, // only Mutter's signal can bring a second report
	})
	r, next := s.waitFor(t, 0, "a report", anyReport)
	if r.Source != "mutter" || r.Idle != 2*time.Minute || r.Inhibited {
		t.Fatalf("report %+v", r)
	}
	deadline := time.Now().Add(hang)
	for {
		if waiting, _ := m.Armed(); waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no user-active watch armed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.Input(t, 40)
	r, _ = s.waitFor(t, next, "the user's return", anyReport)
	if r.Idle != 40*time.Millisecond {
		t.Fatalf("report %+v", r)
	}
}
