// Package presence holds the service-side sources of the owner's presence:
// the evdev input devices (InputDevices), the owner's listed programs
// (Programs), the session reporters' reports that arrive over the admin
// channel (Sessions) and, on macOS, the HID system's idle time (HIDIdle).
// Each source reports to a lending.Sink under its own name; the lending
// engine decides what the reports mean.
//
// The session reporter itself, which runs in the owner's desktop session and
// reads the desktop's idle time, is in package presence/desktop.
package presence

import (
	"log/slog"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// Source names as the sink, /status and the logs show them.
const (
	SourceInputDevices = lending.SourceInputDevices
	SourcePrograms     = lending.SourcePrograms
	SourceHIDIdle      = lending.SourceHIDIdle
	// SessionSourcePrefix begins every session reporter's source name:
	// "session:" + account + "/" + the reporter's source ("session:uid:1000/x11").
	SessionSourcePrefix = "session:"
)

// Defaults for the sources' zero fields.
const (
	DefaultInputDevices   = "/dev/input/event*"
	DefaultRescan         = 2 * time.Second
	DefaultCoalesce       = 250 * time.Millisecond
	DefaultRetryFailed    = time.Minute
	DefaultProgramsEvery  = 2 * time.Second
	DefaultSessionTimeout = 30 * time.Second
	DefaultHIDIdleEvery   = time.Second
)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
