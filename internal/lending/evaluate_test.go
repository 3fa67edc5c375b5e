package lending

import (
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // a Monday

func act(lastInputAgo time.Duration, inhibited bool) *Activity {
	a := &Activity{Inhibited: inhibited}
	if lastInputAgo >= 0 {
		a.LastInput = t0.Add(-lastInputAgo)
	}
	return a
}

// TestFoldPresence covers how sources combine: any live source active makes
// the owner present; idleness needs every live source idle; expired, not
// ready or silent sources do not count; the next change is predicted.
func TestFoldPresence(t *testing.T) {
	const idle = 5 * time.Minute
	never := time.Duration(-1)
	for _, tc := range []struct {
		name        string
		sources     []SourceState
		known, pres bool
		next        time.Time
	}{
		{"no sources", nil, false, false, time.Time{}},
		{"source ready but silent", []SourceState{{Name: SourceInputDevices, Ready: true}}, false, false, time.Time{}},
		{"recent input", []SourceState{{Name: SourceInputDevices, Ready: true, Activity: act(time.Minute, false)}}, true, true, t0.Add(4 * time.Minute)},
		{"input exactly idle_after ago is idle", []SourceState{{Name: SourceInputDevices, Ready: true, Activity: act(idle, false)}}, true, false, time.Time{}},
		{"old input", []SourceState{{Name: SourceInputDevices, Ready: true, Activity: act(time.Hour, false)}}, true, false, time.Time{}},
		{"inhibitor without input", []SourceState{{Name: SessionPrefix + "uid:1000/x11", Ready: true, Activity: act(time.Hour, true)}}, true, true, time.Time{}},
		{"program running", []SourceState{{Name: SourcePrograms, Ready: true, Activity: act(never, true)}}, true, true, time.Time{}},
		{"one idle, one active: present", []SourceState{
			{Name: SourceInputDevices, Ready: true, Activity: act(time.Hour, false)},
			{Name: SessionPrefix + "uid:1000/x11", Ready: true, Activity: act(10*time.Second, false)},
		}, true, true, t0.Add(idle - 10*time.Second)},
		{"every live source idle: away", []SourceState{
			{Name: SourceInputDevices, Ready: true, Activity: act(time.Hour, false)},
			{Name: SessionPrefix + "uid:1000/x11", Ready: true, Activity: act(10*time.Minute, false)},
		}, true, false, time.Time{}},
		{"expired reporter does not count", []SourceState{
			{Name: SessionPrefix + "uid:1000/x11", Ready: true, Activity: &Activity{LastInput: t0, Until: t0.Add(-time.Second)}},
		}, false, false, time.Time{}},
		{"reporter expiry is the next change", []SourceState{
			{Name: SessionPrefix + "uid:1000/x11", Ready: true, Activity: &Activity{LastInput: t0.Add(-time.Hour), Until: t0.Add(30 * time.Second)}},
		}, true, false, t0.Add(30 * time.Second)},
		{"not ready source does not count", []SourceState{{Name: SourceInputDevices, Ready: false, Activity: act(time.Second, false)}}, false, false, time.Time{}},
		{"pressure sources are not presence", []SourceState{{Name: SourceNVML, Ready: true, Activity: act(time.Second, false)}}, false, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, next := FoldPresence(t0, idle, tc.sources)
			if ps.Known != tc.known || ps.Present != tc.pres {
				t.Errorf("known=%v present=%v, want %v %v", ps.Known, ps.Present, tc.known, tc.pres)
			}
			if !next.Equal(tc.next) {
				t.Errorf("next change %v, want %v", next, tc.next)
			}
		})
	}
}

func TestFoldPressure(t *testing.T) {
	res := []string{"gpu0", "gpu1"}
	got := FoldPressure(res, []string{SourcePressureFile}, []SourceState{
		{Name: SourceNVML, Ready: true, Pressure: map[string]Pressure{"gpu1": {Resource: "gpu1", Active: true, Reason: "blender"}}},
		{Name: SourcePressureFile, Ready: true, Pressure: map[string]Pressure{"": {Active: false}}},
	})
	if got["gpu0"].Active || !got["gpu1"].Active {
		t.Fatalf("per-resource pressure: %+v", got)
	}
	// A required source that is not ready fails closed for every resource.
	got = FoldPressure(res, []string{SourcePressureFile}, []SourceState{{Name: SourcePressureFile, Ready: false, Reason: "malformed"}})
	if !got["gpu0"].Active || !got["gpu1"].Active {
		t.Fatalf("not-ready required source: %+v", got)
	}
	// A required source that never reported fails closed too.
	if got = FoldPressure(res, []string{SourcePressureFile}, nil); !got["gpu0"].Active {
		t.Fatalf("silent required source: %+v", got)
	}
	// NVML missing is a state, not pressure (it is not required).
	if got = FoldPressure(res, nil, []SourceState{{Name: SourceNVML, Ready: false, Reason: "unavailable: no driver"}}); got["gpu0"].Active {
		t.Fatalf("missing NVML made pressure: %+v", got)
	}
	// File pressure with no resource applies to every resource.
	got = FoldPressure(res, nil, []SourceState{{Name: SourcePressureFile, Ready: true, Pressure: map[string]Pressure{"": {Active: true, Reason: "render"}}}})
	if !got["gpu0"].Active || !got["gpu1"].Active {
		t.Fatalf("global pressure: %+v", got)
	}
}

// TestEvaluate is the transition table: every input combination that
// matters, with the reason that wins.
func TestEvaluate(t *testing.T) {
	away := PresenceState{Known: true}
	present := PresenceState{Known: true, Present: true}
	unknown := PresenceState{}
	nights, err := ParseWindow(config.Window{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "19:00", End: "07:00"})
	if err != nil {
		t.Fatal(err)
	}
	base := Policy{IdleAfter: 5 * time.Minute, PresenceSources: true, Location: time.UTC}
	headless := base
	headless.PresenceSources = false
	lendUnknown := base
	lendUnknown.LendWhenUnknown = true
	windowed := base
	windowed.Windows = []Window{nights}

	for _, tc := range []struct {
		name     string
		policy   Policy
		now      time.Time
		enabled  bool
		resOn    bool
		presence PresenceState
		pressure bool
		reclaim  bool
		want     Reason
	}{
		{"all clear lends", base, t0, true, true, away, false, false, ReasonNone},
		{"paused", base, t0, false, true, away, false, false, ReasonLendingPaused},
		{"paused wins over presence", base, t0, false, true, present, true, false, ReasonLendingPaused},
		{"resource disabled", base, t0, true, false, away, false, false, ReasonResourceDisabled},
		{"owner present", base, t0, true, true, present, false, false, ReasonOwnerPresent},
		{"owner present wins over pressure", base, t0, true, true, present, true, false, ReasonOwnerPresent},
		{"presence unknown holds", base, t0, true, true, unknown, false, false, ReasonPresenceUnknown},
		{"presence unknown with when_unknown=lend", lendUnknown, t0, true, true, unknown, false, false, ReasonNone},
		{"headless box ignores presence", headless, t0, true, true, unknown, false, false, ReasonNone},
		{"gpu pressure", base, t0, true, true, away, true, false, ReasonGPUPressure},
		{"reclaim in progress holds", base, t0, true, true, away, false, true, ReasonReclaiming},
		{"outside window (Monday noon)", windowed, t0, true, true, away, false, false, ReasonOutsideWindow},
		{"inside window (Monday 20:00)", windowed, t0.Add(8 * time.Hour), true, true, away, false, false, ReasonNone},
		{"inside window after midnight (Tuesday 03:00)", windowed, t0.Add(15 * time.Hour), true, true, away, false, false, ReasonNone},
		{"outside window (Saturday 03:00)", windowed, t0.Add(5*24*time.Hour + 15*time.Hour), true, true, away, false, false, ReasonOutsideWindow},
		{"Saturday 03:00 after a Friday evening", windowed, t0.Add(4*24*time.Hour + 15*time.Hour), true, true, away, false, false, ReasonNone},
		{"disabled wins over window", windowed, t0, true, false, away, false, false, ReasonResourceDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.policy, Situation{
				Now: tc.now, LendingEnabled: tc.enabled, Enabled: map[string]bool{"gpu0": tc.resOn},
				Presence: tc.presence, Pressure: map[string]PressureState{"gpu0": {Active: tc.pressure}},
				Reclaiming: map[string]bool{"gpu0": tc.reclaim},
			})["gpu0"]
			if got.Reason != tc.want || got.Lendable != (tc.want == ReasonNone) {
				t.Fatalf("verdict %+v, want reason %q", got, tc.want)
			}
		})
	}
}

// Hysteresis: after the owner's last input, lending returns exactly when
// that input is idle_after old, not before; a new input resets it.
func TestHysteresis(t *testing.T) {
	p := Policy{IdleAfter: 5 * time.Minute, PresenceSources: true}
	input := t0
	verdictAt := func(now time.Time) Verdict {
		ps, _ := FoldPresence(now, p.IdleAfter, []SourceState{{Name: SourceInputDevices, Ready: true, Activity: &Activity{LastInput: input}}})
		return Evaluate(p, Situation{Now: now, LendingEnabled: true, Enabled: map[string]bool{"gpu0": true}, Presence: ps})["gpu0"]
	}
	if v := verdictAt(t0.Add(5*time.Minute - time.Millisecond)); v.Lendable {
		t.Fatal("lent before idle_after passed")
	}
	if v := verdictAt(t0.Add(5 * time.Minute)); !v.Lendable {
		t.Fatalf("not lent once idle_after passed: %+v", v)
	}
	input = t0.Add(6 * time.Minute)
	if v := verdictAt(t0.Add(7 * time.Minute)); v.Lendable || v.Reason != ReasonOwnerPresent {
		t.Fatalf("new input did not end lending: %+v", v)
	}
}

// resume_after: after a reclaim, the resource stays unlent until the hold
// ends, then lends with nothing else changed.
func TestResumeAfterHold(t *testing.T) {
	p := Policy{PresenceSources: false}
	sit := func(now time.Time) Situation {
		return Situation{Now: now, LendingEnabled: true, Enabled: map[string]bool{"gpu0": true},
			HoldUntil: map[string]time.Time{"gpu0": t0.Add(time.Minute)}}
	}
	if v := Evaluate(p, sit(t0.Add(59*time.Second)))["gpu0"]; v.Lendable || v.Reason != ReasonReclaiming {
		t.Fatalf("inside the hold: %+v", v)
	}
	if v := Evaluate(p, sit(t0.Add(time.Minute)))["gpu0"]; !v.Lendable {
		t.Fatalf("after the hold: %+v", v)
	}
}
