package desktop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// Dialer opens a connection to one D-Bus bus.
type Dialer func() (*dbus.Conn, error)

// LookupEnv reads an environment variable (os.LookupEnv).
type LookupEnv func(string) (string, bool)

// SessionBus dials the session's bus: DBUS_SESSION_BUS_ADDRESS, else
// $XDG_RUNTIME_DIR/bus. It never launches a bus of its own.
func SessionBus(env LookupEnv) Dialer {
	return func() (*dbus.Conn, error) {
		if a, ok := env("DBUS_SESSION_BUS_ADDRESS"); ok && a != "" && a != "autolaunch:" {
			return dbus.Connect(a)
		}
		if dir, ok := env("XDG_RUNTIME_DIR"); ok && dir != "" {
			p := filepath.Join(dir, "bus")
			if _, err := os.Stat(p); err == nil {
				return dbus.Connect("unix:path=" + p)
			}
		}
		return nil, errors.New("no session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist")
	}
}

// SystemBus dials the system bus: DBUS_SYSTEM_BUS_ADDRESS, else the
// standard socket.
func SystemBus(env LookupEnv) Dialer {
	return func() (*dbus.Conn, error) {
		if a, ok := env("DBUS_SYSTEM_BUS_ADDRESS"); ok && a != "" {
			return dbus.Connect(a)
		}
		return dbus.Connect("unix:path=/var/run/dbus/system_bus_socket")
	}
}

// BusAt dials the bus at address.
func BusAt(address string) Dialer {
	return func() (*dbus.Conn, error) { return dbus.Connect(address) }
}

// Bus is a connection shared by the inhibitor checkers on one bus, opened
// on first use and again after it broke.
type Bus struct {
	dial Dialer
	mu   sync.Mutex
	conn *dbus.Conn
}

// NewBus returns a Bus that connects with dial when first used.
func NewBus(dial Dialer) *Bus { return &Bus{dial: dial} }

func (b *Bus) get() (*dbus.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && b.conn.Connected() {
		return b.conn, nil
	}
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	c, err := b.dial()
	if err != nil {
		return nil, err
	}
	b.conn = c
	return c, nil
}

// call calls method on dest's object at path and stores the reply in out.
func (b *Bus) call(ctx context.Context, dest string, path dbus.ObjectPath, method string, args []any, out ...any) error {
	c, err := b.get()
	if err != nil {
		return err
	}
	return c.Object(dest, path).CallWithContext(ctx, method, 0, args...).Store(out...)
}

// Close closes the connection, if open.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn = nil
	return err
}

// busSource is an idle source over its own connection.
type busSource struct {
	name string
	conn *dbus.Conn
	read func(ctx context.Context) (time.Duration, error)
}

func (s *busSource) Name() string                                    { return s.name }
func (s *busSource) Idle(ctx context.Context) (time.Duration, error) { return s.read(ctx) }
func (s *busSource) Close() error                                    { return s.conn.Close() }

// GNOME Mutter's idle monitor.
const (
	mutterDest  = "org.gnome.Mutter.IdleMonitor"
	mutterPath  = dbus.ObjectPath("/org/gnome/Mutter/IdleMonitor/Core")
	mutterIface = "org.gnome.Mutter.IdleMonitor"
	// mutterArmAfter is the idle time after which the reporter asks Mutter
	// to signal the user's return (a one-shot user-active watch). Asking
	// only after a pause keeps a typing user from signalling every key.
	mutterArmAfter = 2 * time.Second
)

// Mutter is GNOME's idle monitor (org.gnome.Mutter.IdleMonitor on the
// session bus): GetIdletime in milliseconds, and a user-active watch that
// signals the user's return at once.
func Mutter(dial Dialer) Candidate {
	return Candidate{Name: "mutter", Open: func(ctx context.Context) (IdleSource, error) { return openMutter(dial) }}
}

type mutterIdle struct {
	conn     *dbus.Conn
	obj      dbus.BusObject
	signals  chan *dbus.Signal
	activity chan struct{}
	done     chan struct{}
	once     sync.Once

	mu    sync.Mutex
	watch uint32 // the armed user-active watch; 0 when none
}

func openMutter(dial Dialer) (*mutterIdle, error) {
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	m := &mutterIdle{
		conn:     conn,
		obj:      conn.Object(mutterDest, mutterPath),
		signals:  make(chan *dbus.Signal, 16),
		activity: make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if err := conn.AddMatchSignal(dbus.WithMatchObjectPath(mutterPath), dbus.WithMatchInterface(mutterIface), dbus.WithMatchMember("WatchFired")); err != nil {
		conn.Close()
		return nil, err
	}
	conn.Signal(m.signals)
	go m.listen()
	return m, nil
}

func (m *mutterIdle) Name() string { return "mutter" }

func (m *mutterIdle) Activity() <-chan struct{} { return m.activity }

func (m *mutterIdle) Idle(ctx context.Context) (time.Duration, error) {
	var ms uint64
	if err := m.obj.CallWithContext(ctx, mutterIface+".GetIdletime", 0).Store(&ms); err != nil {
		return 0, err
	}
	idle := time.Duration(min(ms, uint64(maxIdle/time.Millisecond))) * time.Millisecond
	if idle >= mutterArmAfter {
		m.arm(ctx)
	}
	return idle, nil
}

// arm asks for a user-active watch unless one is armed. The lock is held
// over the call so that a watch that fires at once is still recognised.
func (m *mutterIdle) arm(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watch != 0 {
		return
	}
	var id uint32
	if err := m.obj.CallWithContext(ctx, mutterIface+".AddUserActiveWatch", 0).Store(&id); err == nil {
		m.watch = id
	}
}

func (m *mutterIdle) listen() {
	for {
		select {
		case <-m.done:
			return
		case s, ok := <-m.signals:
			if !ok {
				return
			}
			if s.Name != mutterIface+".WatchFired" || len(s.Body) != 1 {
				continue
			}
			id, _ := s.Body[0].(uint32)
			m.mu.Lock()
			ours := id != 0 && id == m.watch
			if ours {
				m.watch = 0 // user-active watches fire once
			}
			m.mu.Unlock()
			if ours {
				select {
				case m.activity <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (m *mutterIdle) Close() error {
	m.once.Do(func() { close(m.done) })
	m.conn.RemoveSignal(m.signals)
	return m.conn.Close() // Mutter drops the watches of a client that leaves
}

// org.freedesktop.ScreenSaver, the idle inhibition service (KDE Plasma and
// others). KDE answers GetSessionIdleTime in milliseconds (on X11 only);
// older KDE serves it at /ScreenSaver.
const (
	screenSaverDest  = "org.freedesktop.ScreenSaver"
	screenSaverIface = "org.freedesktop.ScreenSaver"
)

var screenSaverPaths = []dbus.ObjectPath{"/org/freedesktop/ScreenSaver", "/ScreenSaver"}

// ScreenSaver reads org.freedesktop.ScreenSaver's GetSessionIdleTime
// (milliseconds) on the session bus.
func ScreenSaver(dial Dialer) Candidate {
	return Candidate{Name: "screensaver", Open: func(ctx context.Context) (IdleSource, error) {
		conn, err := dial()
		if err != nil {
			return nil, err
		}
		var last error
		for _, p := range screenSaverPaths {
			obj := conn.Object(screenSaverDest, p)
			read := func(ctx context.Context) (time.Duration, error) {
				var ms uint32
				if err := obj.CallWithContext(ctx, screenSaverIface+".GetSessionIdleTime", 0).Store(&ms); err != nil {
					return 0, err
				}
				return time.Duration(ms) * time.Millisecond, nil
			}
			if _, last = read(ctx); last == nil {
				return &busSource{name: "screensaver", conn: conn, read: read}, nil
			}
		}
		conn.Close()
		return nil, last
	}}
}

// logind (org.freedesktop.login1 on the system bus).
const (
	logindDest      = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindManager   = "org.freedesktop.login1.Manager"
	logindSessionIf = "org.freedesktop.login1.Session"
	logindUserIf    = "org.freedesktop.login1.User"
	propertiesIf    = "org.freedesktop.DBus.Properties"
)

// LogindSession says which logind session the reporter reads: the one
// named by SessionID (XDG_SESSION_ID), else the one PID belongs to, else
// the graphical session of UID (its Display).
type LogindSession struct {
	SessionID string
	PID       uint32
	UID       uint32
}

// Logind reads the session's IdleHint and IdleSinceHint from logind on the
// system bus. A session whose desktop has not declared it idle is reported
// as in use (idle 0); an idle one as idle since IdleSinceHint.
func Logind(dial Dialer, which LogindSession) Candidate {
	return Candidate{Name: "logind", Open: func(ctx context.Context) (IdleSource, error) {
		conn, err := dial()
		if err != nil {
			return nil, err
		}
		path, err := findSession(ctx, conn, which)
		if err != nil {
			conn.Close()
			return nil, err
		}
		obj := conn.Object(logindDest, path)
		read := func(ctx context.Context) (time.Duration, error) {
			var props map[string]dbus.Variant
			if err := obj.CallWithContext(ctx, propertiesIf+".GetAll", 0, logindSessionIf).Store(&props); err != nil {
				return 0, err
			}
			return logindIdle(props, time.Now())
		}
		return &busSource{name: "logind", conn: conn, read: read}, nil
	}}
}

// logindIdle turns a session's properties into an idle time.
func logindIdle(props map[string]dbus.Variant, now time.Time) (time.Duration, error) {
	hint, ok := props["IdleHint"].Value().(bool)
	if !ok {
		return 0, errors.New("logind: the session has no IdleHint")
	}
	if !hint {
		return 0, nil
	}
	since, ok := props["IdleSinceHint"].Value().(uint64)
	if !ok || since == 0 {
		return 0, errors.New("logind: the session is idle but has no IdleSinceHint")
	}
	idle := now.Sub(time.UnixMicro(int64(min(since, 1<<62))))
	return max(idle, 0), nil
}

func findSession(ctx context.Context, conn *dbus.Conn, which LogindSession) (dbus.ObjectPath, error) {
	mgr := conn.Object(logindDest, logindPath)
	var path dbus.ObjectPath
	var why []string
	if which.SessionID != "" {
		err := mgr.CallWithContext(ctx, logindManager+".GetSession", 0, which.SessionID).Store(&path)
		if err == nil {
			return path, nil
		}
		why = append(why, fmt.Sprintf("session %q: %v", which.SessionID, err))
	}
	if which.PID != 0 {
		err := mgr.CallWithContext(ctx, logindManager+".GetSessionByPID", 0, which.PID).Store(&path)
		if err == nil {
			return path, nil
		}
		why = append(why, fmt.Sprintf("pid %d: %v", which.PID, err))
	}
	var user dbus.ObjectPath
	err := mgr.CallWithContext(ctx, logindManager+".GetUser", 0, which.UID).Store(&user)
	if err == nil {
		var display dbus.Variant
		err = conn.Object(logindDest, user).CallWithContext(ctx, propertiesIf+".Get", 0, logindUserIf, "Display").Store(&display)
		if err == nil {
			if d, ok := display.Value().([]any); ok && len(d) == 2 {
				if p, ok := d[1].(dbus.ObjectPath); ok && p != "/" && p.IsValid() {
					return p, nil
				}
			}
			err = errors.New("the user has no graphical session")
		}
	}
	why = append(why, fmt.Sprintf("uid %d: %v", which.UID, err))
	return "", fmt.Errorf("no logind session: %s", strings.Join(why, "; "))
}

// busChecker is an inhibitor checker over a shared bus.
type busChecker struct {
	name  string
	bus   *Bus
	check func(ctx context.Context, b *Bus) (bool, error)
}

func (c *busChecker) Name() string                                { return c.name }
func (c *busChecker) Inhibited(ctx context.Context) (bool, error) { return c.check(ctx, c.bus) }
func (c *busChecker) Close() error                                { return c.bus.Close() }

// Inhibitor is one entry of logind's ListInhibitors.
type Inhibitor struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// LogindInhibitors reports an idle inhibitor held through logind (what
// includes "idle", mode "block") by uid's own programs; system services'
// locks are not the owner's presence.
func LogindInhibitors(bus *Bus, uid uint32) InhibitChecker {
	return &busChecker{name: "logind-inhibitors", bus: bus, check: func(ctx context.Context, b *Bus) (bool, error) {
		var list []Inhibitor
		if err := b.call(ctx, logindDest, logindPath, logindManager+".ListInhibitors", nil, &list); err != nil {
			return false, err
		}
		return idleBlocked(list, uid), nil
	}}
}

func idleBlocked(list []Inhibitor, uid uint32) bool {
	for _, in := range list {
		if in.Mode != "block" || in.UID != uid {
			continue
		}
		for _, w := range strings.Split(in.What, ":") {
			if w == "idle" {
				return true
			}
		}
	}
	return false
}

// gnomeInhibitIdle is GsmInhibitorFlag's "inhibit the session being
// marked as idle".
const gnomeInhibitIdle = 8

// GnomeSession asks GNOME's session manager whether anything inhibits
// idleness (IsInhibited(8)): media players and video calls that call
// org.freedesktop.ScreenSaver.Inhibit on GNOME land there.
func GnomeSession(bus *Bus) InhibitChecker {
	return &busChecker{name: "gnome-session", bus: bus, check: func(ctx context.Context, b *Bus) (bool, error) {
		var on bool
		err := b.call(ctx, "org.gnome.SessionManager", "/org/gnome/SessionManager", "org.gnome.SessionManager.IsInhibited", []any{uint32(gnomeInhibitIdle)}, &on)
		return on, err
	}}
}

// PowerManagement asks org.freedesktop.PowerManagement.Inhibit.HasInhibit
// (KDE Plasma, Xfce): where org.freedesktop.ScreenSaver inhibitions land
// on those desktops.
func PowerManagement(bus *Bus) InhibitChecker {
	return &busChecker{name: "power-management", bus: bus, check: func(ctx context.Context, b *Bus) (bool, error) {
		var on bool
		err := b.call(ctx, "org.freedesktop.PowerManagement", "/org/freedesktop/PowerManagement/Inhibit", "org.freedesktop.PowerManagement.Inhibit.HasInhibit", nil, &on)
		return on, err
	}}
}
