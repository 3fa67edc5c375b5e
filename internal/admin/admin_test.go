package admin

import (
	"log/slog"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

func newService() *Service {
	return New(lending.NewSwitches(true, map[string]bool{"gpu0": true}), new(slog.LevelVar), nil)
}

func kind(err error) string {
	if e, ok := AsError(err); ok {
		return e.Kind
	}
	return ""
}

func TestWhoMayResume(t *testing.T) {
	alice := Caller{Account: "uid:1000", Via: "socket"}
	bob := Caller{Account: "uid:1001", Via: "socket"}
	root := Caller{Account: "uid:0", Administrator: true, Via: "socket"}
	tcp := Caller{Via: "http"}

	s := newService()
	s.Pause(alice)
	if _, err := s.Resume(bob); kind(err) != ErrAdministratorRequired {
		t.Fatalf("another account resumed alice's pause: %v", err)
	}
	if a, err := s.Resume(alice); err != nil || !*a.LendingEnabled {
		t.Fatalf("alice could not resume her own pause: %v", err)
	}

	s.Pause(alice)
	s.Pause(bob) // does not take the pause over
	if _, err := s.Resume(bob); kind(err) != ErrAdministratorRequired {
		t.Fatal("a second pause let bob resume")
	}
	if _, err := s.Resume(root); err != nil {
		t.Fatalf("administrator could not resume: %v", err)
	}

	s.Pause(tcp) // names no account
	if _, err := s.Resume(tcp); kind(err) != ErrAdministratorRequired {
		t.Fatal("an anonymous pause was resumed without an administrator")
	}
	if _, err := s.Resume(alice); kind(err) != ErrAdministratorRequired {
		t.Fatal("an anonymous pause was resumed by a standard account")
	}
}

func TestResourceAndDebugNeedAdministrator(t *testing.T) {
	s := newService()
	std := Caller{Account: "uid:1000", Via: "socket"}
	adm := Caller{Administrator: true, Via: "http"}
	if _, err := s.SetResource(std, "gpu0", false); kind(err) != ErrAdministratorRequired {
		t.Fatal("standard account switched a resource")
	}
	if _, err := s.SetResource(adm, "gpu9", false); kind(err) != ErrNotFound {
		t.Fatalf("unknown resource: %v", err)
	}
	if a, err := s.SetResource(adm, "gpu0", false); err != nil || *a.Enabled {
		t.Fatalf("switch: %v", err)
	}
	if ok, why := s.Switches().Admit("gpu0"); ok || why != lending.ReasonResourceDisabled {
		t.Fatal("disabled resource still admits")
	}
	if _, err := s.StartDebug(std, 5); kind(err) != ErrAdministratorRequired {
		t.Fatal("standard account opened the debug window")
	}
	for _, m := range []int{0, 241, -1} {
		if _, err := s.StartDebug(adm, m); kind(err) != ErrInvalidRequest {
			t.Fatalf("minutes=%d accepted", m)
		}
	}
	if _, err := s.StartDebug(adm, 30); err != nil {
		t.Fatal(err)
	}
	if s.level.Level() != slog.LevelDebug || s.DebugUntil().IsZero() {
		t.Fatal("debug window did not lower the level")
	}
	if _, err := s.EndDebug(adm); err != nil || s.level.Level() != slog.LevelInfo || !s.DebugUntil().IsZero() {
		t.Fatal("ending the window did not restore the level")
	}
}

// The debug window ends by itself and restores the configured level.
func TestDebugWindowEndsByItself(t *testing.T) {
	s := newService()
	s.minute = time.Millisecond
	if _, err := s.StartDebug(Caller{Administrator: true, Via: "http"}, 5); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.level.Level() != slog.LevelInfo || !s.DebugUntil().IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the debug window never closed by itself")
		}
		time.Sleep(time.Millisecond)
	}
}
