package lending

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
)

// Policy is the part of the configuration the engine decides by.
type Policy struct {
	// IdleAfter is how long the owner must be idle before lending.
	IdleAfter time.Duration
	// LendWhenUnknown lends while no presence source knows (when_unknown = "lend").
	LendWhenUnknown bool
	// PresenceSources is false on a headless box: no presence input at all,
	// so the owner is never present.
	PresenceSources bool
	// RequiredPressure names GPU-pressure sources that fail closed: while
	// one is not ready, every resource is under pressure.
	RequiredPressure []string
	// Windows restrict lending to these times; none means any time.
	Windows []Window
	// Location is the time zone windows are read in.
	Location *time.Location
	// ReclaimGrace is how long in-flight work may run after lending ends.
	ReclaimGrace time.Duration
	// CancelTimeout bounds waiting for cancelled work and unloads; work not
	// confirmed ended by then is held.
	CancelTimeout time.Duration
	// ResumeAfter holds a resource (reclaiming) for this long after its
	// reclaim finished.
	ResumeAfter time.Duration
}

// PolicyFrom builds the engine policy from a validated config.
func PolicyFrom(cfg *config.Config) Policy {
	p := Policy{
		IdleAfter:       cfg.Lending.IdleAfter.Duration,
		LendWhenUnknown: cfg.Presence.WhenUnknown == "lend",
		PresenceSources: len(cfg.Presence.Sources) > 0,
		Location:        time.Local,
		ReclaimGrace:    cfg.Lending.ReclaimGrace.Duration,
		CancelTimeout:   cfg.Lending.UnloadTimeout.Duration,
		ResumeAfter:     cfg.Lending.ResumeAfter.Duration,
	}
	if cfg.Presence.GPUPressureFile != "" {
		p.RequiredPressure = append(p.RequiredPressure, SourcePressureFile)
	}
	for _, w := range cfg.Lending.Windows {
		if win, err := ParseWindow(w); err == nil {
			p.Windows = append(p.Windows, win)
		}
	}
	return p
}

// Source names the engine knows.
const (
	SourceInputDevices = "input-devices"
	SourcePrograms     = "programs"
	// SourceHIDIdle is macOS's HID idle time (the input-devices source there).
	SourceHIDIdle      = "hid-idle"
	SourceNVML         = "nvml"
	SourcePressureFile = "pressure-file"
	// SessionPrefix begins every session reporter's source name.
	SessionPrefix = "session:"
)

// Window is a parsed lending window: on its days, from Start to End
// (minutes after midnight; End <= Start crosses midnight).
type Window struct {
	Days       [7]bool // indexed by time.Weekday
	Start, End int
}

var dayIndex = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseWindow parses a validated [[lending.window]].
func ParseWindow(w config.Window) (Window, error) {
	var out Window
	for _, d := range w.Days {
		i, ok := dayIndex[d]
		if !ok {
			return Window{}, fmt.Errorf("unknown day %q", d)
		}
		out.Days[i] = true
	}
	var err error
	if out.Start, err = clock(w.Start); err != nil {
		return Window{}, err
	}
	if out.End, err = clock(w.End); err != nil {
		return Window{}, err
	}
	return out, nil
}

func clock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("bad time of day %q", s)
	}
	return hh*60 + mm, nil
}

// Contains reports whether t (in its own location) falls in the window. A
// window that crosses midnight belongs to the day it starts on.
func (w Window) Contains(t time.Time) bool {
	min := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	if w.Start < w.End {
		return w.Days[day] && min >= w.Start && min < w.End
	}
	// Crosses midnight: the evening part on a listed day, or the morning
	// part on the day after a listed day.
	yesterday := (day + 6) % 7
	return (w.Days[day] && min >= w.Start) || (w.Days[yesterday] && min < w.End)
}

// inWindows reports whether lending is allowed at t by the windows.
func (p Policy) inWindows(t time.Time) bool {
	if len(p.Windows) == 0 {
		return true
	}
	loc := p.Location
	if loc == nil {
		loc = time.Local
	}
	t = t.In(loc)
	for _, w := range p.Windows {
		if w.Contains(t) {
			return true
		}
	}
	return false
}
