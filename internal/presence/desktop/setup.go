package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vacancyd/vacancyd/internal/presence"
)

// SourceAuto picks the first idle source that answers.
const SourceAuto = "auto"

// Setup is what a session reporter reads on this system.
type Setup struct {
	// Candidates are the idle sources in order of preference.
	Candidates []Candidate
	// Inhibitors are the idle-inhibitor checkers.
	Inhibitors []InhibitChecker
}

// Names returns the candidates' names, in order.
func (s Setup) Names() []string {
	names := make([]string, len(s.Candidates))
	for i, c := range s.Candidates {
		names[i] = c.Name
	}
	return names
}

// Choose returns the candidates for --source: all of them for SourceAuto,
// or the one named.
func (s Setup) Choose(source string) ([]Candidate, error) {
	if source == SourceAuto {
		return s.Candidates, nil
	}
	for _, c := range s.Candidates {
		if c.Name == source {
			return []Candidate{c}, nil
		}
	}
	return nil, fmt.Errorf("unknown idle source %q: use %s or one of %s", source, SourceAuto, strings.Join(s.Names(), ", "))
}

// CommandOutput runs a command and returns its standard output.
type CommandOutput func(ctx context.Context) ([]byte, error)

// MacOS reads the HID system's idle time (HIDIdleTime) from ioreg's
// output, which read returns (`ioreg -c IOHIDSystem -d 4`).
func MacOS(read CommandOutput) Candidate {
	return Candidate{Name: "macos", Open: func(ctx context.Context) (IdleSource, error) {
		return &funcSource{name: "macos", read: func(ctx context.Context) (time.Duration, error) {
			out, err := read(ctx)
			if err != nil {
				return 0, err
			}
			return presence.ParseHIDIdleTime(out)
		}}, nil
	}}
}

// PMSet reports the assertion that keeps a Mac's display awake
// (PreventUserIdleDisplaySleep: a video playing, a call) from the output
// of `pmset -g assertions`, which read returns.
func PMSet(read CommandOutput) InhibitChecker {
	return &funcChecker{name: "pmset", check: func(ctx context.Context) (bool, error) {
		out, err := read(ctx)
		if err != nil {
			return false, err
		}
		return parsePMSetAssertions(out)
	}}
}

// parsePMSetAssertions reads the system-wide PreventUserIdleDisplaySleep
// count from `pmset -g assertions`.
func parsePMSetAssertions(out []byte) (bool, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == "PreventUserIdleDisplaySleep" {
			return f[1] != "0", nil
		}
	}
	return false, errors.New("pmset: no PreventUserIdleDisplaySleep in the assertions")
}

// idleFromTicks is the idle time from Windows' GetTickCount and
// LASTINPUTINFO.dwTime: milliseconds on a 32-bit counter that wraps every
// 49.7 days, so the difference is taken modulo 2^32.
func idleFromTicks(now, lastInput uint32) time.Duration {
	return time.Duration(now-lastInput) * time.Millisecond
}

// esDisplayRequired is EXECUTION_STATE's ES_DISPLAY_REQUIRED: a program
// (a video player, a call) keeps the display on.
const esDisplayRequired = 0x00000002

func displayRequired(state uint32) bool { return state&esDisplayRequired != 0 }

// funcSource is an idle source that is a function.
type funcSource struct {
	name string
	read func(ctx context.Context) (time.Duration, error)
}

func (s *funcSource) Name() string                                    { return s.name }
func (s *funcSource) Idle(ctx context.Context) (time.Duration, error) { return s.read(ctx) }
func (s *funcSource) Close() error                                    { return nil }

// funcChecker is an inhibitor checker that is a function.
type funcChecker struct {
	name  string
	check func(ctx context.Context) (bool, error)
}

func (c *funcChecker) Name() string                                { return c.name }
func (c *funcChecker) Inhibited(ctx context.Context) (bool, error) { return c.check(ctx) }
