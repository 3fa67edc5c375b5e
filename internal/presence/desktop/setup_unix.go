//go:build !windows && !darwin

package desktop

import "os"

// Default returns the Linux (and other Unix) desktop's idle sources, in
// order: GNOME Mutter, org.freedesktop.ScreenSaver, X11, logind; and the
// inhibitor checkers: logind's idle locks, GNOME's session manager,
// org.freedesktop.PowerManagement. env supplies the session's
// environment (DBUS_SESSION_BUS_ADDRESS, DISPLAY, WAYLAND_DISPLAY,
// XDG_SESSION_TYPE, XDG_SESSION_ID).
func Default(env LookupEnv) Setup {
	session, system := SessionBus(env), SystemBus(env)
	display, _ := env("DISPLAY")
	sid, _ := env("XDG_SESSION_ID")
	uid := uint32(os.Getuid())
	sessionBus, systemBus := NewBus(session), NewBus(system)
	return Setup{
		Candidates: []Candidate{
			Mutter(session),
			ScreenSaver(session),
			X11(display, isWayland(env)),
			Logind(system, LogindSession{SessionID: sid, PID: uint32(os.Getpid()), UID: uid}),
		},
		Inhibitors: []InhibitChecker{
			LogindInhibitors(systemBus, uid),
			GnomeSession(sessionBus),
			PowerManagement(sessionBus),
		},
	}
}

func isWayland(env LookupEnv) bool {
	if d, ok := env("WAYLAND_DISPLAY"); ok && d != "" {
		return true
	}
	t, _ := env("XDG_SESSION_TYPE")
	return t == "wayland"
}
