package lending

import (
	"sort"
	"strings"
	"time"
)

// SourceState is one input source as the engine holds it.
type SourceState struct {
	Name   string `json:"name"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Activity is the presence source's latest report (presence sources).
	Activity *Activity `json:"activity,omitempty"`
	// Pressure is the pressure source's latest report per resource ("" =
	// every resource) (pressure sources).
	Pressure map[string]Pressure `json:"pressure,omitempty"`
}

func isPresenceSource(name string) bool {
	return name == SourceInputDevices || name == SourcePrograms || name == SourceHIDIdle || strings.HasPrefix(name, SessionPrefix)
}

// PresenceState is the owner's presence folded from every live source.
type PresenceState struct {
	// Known is false while no live presence source has reported.
	Known bool `json:"known"`
	// Present means some live source sees recent input or an inhibitor.
	Present bool `json:"present"`
	// LastInput is the latest input any live source saw.
	LastInput time.Time `json:"last_input,omitzero"`
	// IdleSeconds is how long ago LastInput was.
	IdleSeconds float64 `json:"idle_seconds"`
	// Inhibited names the sources holding an inhibitor or a listed program.
	Inhibited []string `json:"inhibited,omitempty"`
	// Live names the sources that count now.
	Live []string `json:"live"`
}

// FoldPresence combines presence sources at now. A source counts while it
// is ready, has reported, and its report has not expired. Any live source
// with recent input (less than idleAfter ago) or an inhibitor makes the owner
// present; idleness needs every live source idle. It also returns the next
// time the result changes with no new report (zero if none).
func FoldPresence(now time.Time, idleAfter time.Duration, sources []SourceState) (PresenceState, time.Time) {
	var ps PresenceState
	var next time.Time
	soonest := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, s := range sources {
		if !isPresenceSource(s.Name) || !s.Ready || s.Activity == nil {
			continue
		}
		a := s.Activity
		if !a.Until.IsZero() && !now.Before(a.Until) {
			continue
		}
		soonest(a.Until)
		ps.Known = true
		ps.Live = append(ps.Live, s.Name)
		if a.Inhibited {
			ps.Present = true
			ps.Inhibited = append(ps.Inhibited, s.Name)
		}
		if !a.LastInput.IsZero() {
			if a.LastInput.After(ps.LastInput) {
				ps.LastInput = a.LastInput
			}
			if now.Sub(a.LastInput) < idleAfter {
				ps.Present = true
				soonest(a.LastInput.Add(idleAfter))
			}
		}
	}
	if !ps.LastInput.IsZero() {
		ps.IdleSeconds = now.Sub(ps.LastInput).Seconds()
	}
	sort.Strings(ps.Live)
	sort.Strings(ps.Inhibited)
	return ps, next
}

// PressureState is the GPU pressure on one resource.
type PressureState struct {
	Active  bool     `json:"active"`
	Reasons []string `json:"reasons,omitempty"`
}

// FoldPressure combines pressure sources per resource. A required source
// that is not ready puts every resource under pressure.
func FoldPressure(resources []string, required []string, sources []SourceState) map[string]PressureState {
	out := make(map[string]PressureState, len(resources))
	add := func(res, reason string) {
		for _, r := range resources {
			if res == "" || res == r {
				st := out[r]
				st.Active = true
				st.Reasons = append(st.Reasons, reason)
				out[r] = st
			}
		}
	}
	for _, s := range sources {
		if isPresenceSource(s.Name) {
			continue
		}
		if !s.Ready {
			for _, req := range required {
				if req == s.Name {
					add("", s.Name+" not ready: "+s.Reason)
				}
			}
			continue
		}
		for _, p := range s.Pressure {
			if p.Active {
				add(p.Resource, s.Name+": "+p.Reason)
			}
		}
	}
	for _, req := range required {
		found := false
		for _, s := range sources {
			found = found || s.Name == req
		}
		if !found {
			add("", req+" not ready: no report yet")
		}
	}
	for _, r := range resources {
		if _, ok := out[r]; !ok {
			out[r] = PressureState{}
		}
	}
	return out
}

// Verdict is whether a resource may be lent, and why not.
type Verdict struct {
	Lendable bool   `json:"lendable"`
	Reason   Reason `json:"reason,omitempty"`
}

// Situation is everything a verdict depends on at one moment.
type Situation struct {
	Now            time.Time
	LendingEnabled bool
	// Enabled is each resource's switch.
	Enabled    map[string]bool
	Presence   PresenceState
	Pressure   map[string]PressureState
	Reclaiming map[string]bool
	// HoldUntil is, per resource, when the resume_after hold after its last
	// reclaim ends.
	HoldUntil map[string]time.Time
}

// Evaluate is the pure transition function: the verdict for every resource.
// The first reason that applies wins, in this order: lending_paused,
// resource_disabled, outside_window, owner_present, presence_unknown,
// gpu_pressure, reclaiming (a reclaim running, or the resume_after hold
// after one).
func Evaluate(p Policy, s Situation) map[string]Verdict {
	out := make(map[string]Verdict, len(s.Enabled))
	inWindow := p.inWindows(s.Now)
	for id, enabled := range s.Enabled {
		why := ReasonNone
		switch {
		case !s.LendingEnabled:
			why = ReasonLendingPaused
		case !enabled:
			why = ReasonResourceDisabled
		case !inWindow:
			why = ReasonOutsideWindow
		case p.PresenceSources && s.Presence.Present:
			why = ReasonOwnerPresent
		case p.PresenceSources && !s.Presence.Known && !p.LendWhenUnknown:
			why = ReasonPresenceUnknown
		case s.Pressure[id].Active:
			why = ReasonGPUPressure
		case s.Reclaiming[id] || s.Now.Before(s.HoldUntil[id]):
			why = ReasonReclaiming
		}
		out[id] = Verdict{Lendable: why == ReasonNone, Reason: why}
	}
	return out
}
