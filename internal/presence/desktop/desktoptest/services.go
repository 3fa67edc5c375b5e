package desktoptest

import (
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// Mutter is a fake of GNOME Mutter's org.gnome.Mutter.IdleMonitor: the test
// sets the idle time and fires the user-active watches clients asked for,
// as Mutter does when input arrives.
type Mutter struct {
	conn *dbus.Conn

	mu      sync.Mutex
	idleMS  uint64
	next    uint32
	watches map[uint32]bool
	asked   int
}

// Mutter's names.
const (
	MutterName  = "org.gnome.Mutter.IdleMonitor"
	MutterPath  = dbus.ObjectPath("/org/gnome/Mutter/IdleMonitor/Core")
	MutterIface = "org.gnome.Mutter.IdleMonitor"
)

// ServeMutter serves a fake Mutter idle monitor on the bus at addr.
func ServeMutter(t testing.TB, addr string, idleMS uint64) *Mutter {
	t.Helper()
	m := &Mutter{conn: own(t, addr, MutterName), idleMS: idleMS, watches: map[uint32]bool{}}
	export(t, m.conn, MutterPath, MutterIface, map[string]any{
		"GetIdletime": func() (uint64, *dbus.Error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.idleMS, nil
		},
		"AddUserActiveWatch": func() (uint32, *dbus.Error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.next++
			m.watches[m.next] = true
			m.asked++
			return m.next, nil
		},
		"AddIdleWatch": func(uint64) (uint32, *dbus.Error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.next++
			return m.next, nil
		},
		"RemoveWatch": func(id uint32) *dbus.Error {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.watches, id)
			return nil
		},
	})
	return m
}

// SetIdle sets the idle time GetIdletime answers, in milliseconds.
func (m *Mutter) SetIdle(ms uint64) {
	m.mu.Lock()
	m.idleMS = ms
	m.mu.Unlock()
}

// Input is the user's return: the idle time drops to ms and every armed
// user-active watch fires once (WatchFired) and is gone. It returns how
// many fired.
func (m *Mutter) Input(t testing.TB, ms uint64) int {
	t.Helper()
	m.mu.Lock()
	m.idleMS = ms
	var fire []uint32
	for id := range m.watches {
		fire = append(fire, id)
	}
	clear(m.watches)
	m.mu.Unlock()
	for _, id := range fire {
		if err := m.conn.Emit(MutterPath, MutterIface+".WatchFired", id); err != nil {
			t.Fatal(err)
		}
	}
	return len(fire)
}

// Armed returns how many user-active watches are waiting to fire, and how
// many were ever asked for.
func (m *Mutter) Armed() (waiting, asked int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watches), m.asked
}

// ServeScreenSaver serves a fake org.freedesktop.ScreenSaver whose
// GetSessionIdleTime answers *idleMS, at path ("/org/freedesktop/ScreenSaver",
// or older KDE's "/ScreenSaver").
func ServeScreenSaver(t testing.TB, addr string, path dbus.ObjectPath, idleMS *Value[uint32]) {
	t.Helper()
	c := own(t, addr, "org.freedesktop.ScreenSaver")
	export(t, c, path, "org.freedesktop.ScreenSaver", map[string]any{
		"GetSessionIdleTime": func() (uint32, *dbus.Error) { return idleMS.Get(), nil },
	})
}

// ServeGnomeSession serves a fake GNOME session manager whose
// IsInhibited(flags) answers whether *inhibited has any of flags.
func ServeGnomeSession(t testing.TB, addr string, inhibited *Value[uint32]) {
	t.Helper()
	c := own(t, addr, "org.gnome.SessionManager")
	export(t, c, "/org/gnome/SessionManager", "org.gnome.SessionManager", map[string]any{
		"IsInhibited": func(flags uint32) (bool, *dbus.Error) { return inhibited.Get()&flags != 0, nil },
	})
}

// ServePowerManagement serves a fake org.freedesktop.PowerManagement.Inhibit
// whose HasInhibit answers *held.
func ServePowerManagement(t testing.TB, addr string, held *Value[bool]) {
	t.Helper()
	c := own(t, addr, "org.freedesktop.PowerManagement")
	export(t, c, "/org/freedesktop/PowerManagement/Inhibit", "org.freedesktop.PowerManagement.Inhibit", map[string]any{
		"HasInhibit": func() (bool, *dbus.Error) { return held.Get(), nil },
	})
}

// Inhibitor is one of logind's ListInhibitors entries.
type Inhibitor struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// Logind is a fake of the parts of org.freedesktop.login1 the reporter
// reads: one user whose graphical session (its Display) has an idle hint,
// and the inhibitor list. It knows no session by id or by pid, as logind
// answers a reporter run from a systemd user unit.
type Logind struct {
	props     *prop.Properties
	mu        sync.Mutex
	inhibitor []Inhibitor
}

// Logind's paths.
const (
	LogindSession = dbus.ObjectPath("/org/freedesktop/login1/session/_32")
	LogindUser    = dbus.ObjectPath("/org/freedesktop/login1/user/_1000")
)

// ServeLogind serves a fake logind on the bus at addr whose user uid has the
// graphical session "2".
func ServeLogind(t testing.TB, addr string, uid uint32) *Logind {
	t.Helper()
	c := own(t, addr, "org.freedesktop.login1")
	l := &Logind{}
	noSuch := func(what string) *dbus.Error {
		return dbus.NewError("org.freedesktop.login1.NoSessionForPID", []any{"no session for " + what})
	}
	export(t, c, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", map[string]any{
		"GetSession":      func(id string) (dbus.ObjectPath, *dbus.Error) { return "", noSuch("id " + id) },
		"GetSessionByPID": func(pid uint32) (dbus.ObjectPath, *dbus.Error) { return "", noSuch("pid") },
		"GetUser": func(u uint32) (dbus.ObjectPath, *dbus.Error) {
			if u != uid {
				return "", dbus.NewError("org.freedesktop.login1.NoSuchUser", []any{"no such user"})
			}
			return LogindUser, nil
		},
		"ListInhibitors": func() ([]Inhibitor, *dbus.Error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return append([]Inhibitor{}, l.inhibitor...), nil
		},
	})
	type display struct {
		ID   string
		Path dbus.ObjectPath
	}
	if _, err := prop.Export(c, LogindUser, prop.Map{"org.freedesktop.login1.User": {
		"Display": {Value: display{"2", LogindSession}, Emit: prop.EmitFalse},
	}}); err != nil {
		t.Fatal(err)
	}
	props, err := prop.Export(c, LogindSession, prop.Map{"org.freedesktop.login1.Session": {
		"IdleHint":      {Value: false, Emit: prop.EmitTrue},
		"IdleSinceHint": {Value: uint64(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l.props = props
	return l
}

// SetIdle sets the session's IdleHint and IdleSinceHint (microseconds since
// the epoch).
func (l *Logind) SetIdle(hint bool, sinceMicros uint64) {
	l.props.SetMust("org.freedesktop.login1.Session", "IdleSinceHint", sinceMicros)
	l.props.SetMust("org.freedesktop.login1.Session", "IdleHint", hint)
}

// SetInhibitors replaces the inhibitor list.
func (l *Logind) SetInhibitors(list ...Inhibitor) {
	l.mu.Lock()
	l.inhibitor = list
	l.mu.Unlock()
}

// Value is a value a fake answers with, which the test may change.
type Value[T any] struct {
	mu sync.Mutex
	v  T
}

// NewValue returns a Value holding v.
func NewValue[T any](v T) *Value[T] { return &Value[T]{v: v} }

// Get returns the value.
func (v *Value[T]) Get() T {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.v
}

// Set changes the value.
func (v *Value[T]) Set(x T) {
	v.mu.Lock()
	v.v = x
	v.mu.Unlock()
}
