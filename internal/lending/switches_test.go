package lending

import "testing"

func TestSwitchesAdmit(t *testing.T) {
	s := NewSwitches(true, map[string]bool{"gpu0": true, "gpu1": false})
	if ok, why := s.Admit("gpu0"); !ok || why != ReasonNone {
		t.Fatalf("gpu0 enabled: %v %q", ok, why)
	}
	if ok, why := s.Admit("gpu1"); ok || why != ReasonResourceDisabled {
		t.Fatalf("gpu1 disabled: %v %q", ok, why)
	}
	if ok, why := s.Admit("nope"); ok || why != ReasonResourceDisabled {
		t.Fatalf("unknown resource: %v %q", ok, why)
	}
	ch := s.Changed()
	if !s.Pause(Pauser{Account: "uid:1000", Via: "socket"}) {
		t.Fatal("pause did not change state")
	}
	select {
	case <-ch:
	default:
		t.Fatal("pause did not signal a change")
	}
	if ok, why := s.Admit("gpu0"); ok || why != ReasonLendingPaused {
		t.Fatalf("paused: %v %q", ok, why)
	}
}

// A second pause must not replace the first pauser: otherwise another
// account could take over a pause and resume it as its own.
func TestSecondPauseKeepsFirstPauser(t *testing.T) {
	s := NewSwitches(true, map[string]bool{"gpu0": true})
	s.Pause(Pauser{Account: "uid:1000", Via: "socket"})
	if s.Pause(Pauser{Account: "uid:1001", Via: "socket"}) {
		t.Fatal("second pause reported a change")
	}
	if by := s.State().PausedBy; by == nil || by.Account != "uid:1000" {
		t.Fatalf("paused by %+v, want uid:1000", by)
	}
	if !s.Resume() || !s.State().LendingEnabled || s.State().PausedBy != nil {
		t.Fatal("resume did not clear the pause")
	}
	if err := s.SetResource("gpu9", false); err == nil {
		t.Fatal("unknown resource accepted")
	}
}
