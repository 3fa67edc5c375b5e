// Package admin holds the administrative actions themselves: pausing and
// resuming lending, switching resources, and the debug logging window. HTTP,
// the Linux admin socket and the Windows admin pipe all call the same
// Service, so an action means the same thing whichever way it arrives; each
// channel only decides who the Caller is.
package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// Caller is who asks for an action, as the channel established it.
type Caller struct {
	// Account is the caller's verified account ("uid:1000", a Windows SID);
	// empty when the channel cannot tell (TCP loopback, a token).
	Account string
	// Administrator is true for root, an admin-group member, an elevated
	// Windows administrator, or an admin-scoped token.
	Administrator bool
	// Via names the channel: "http", "socket", "pipe".
	Via string
}

// Kinds of refusal an action can give.
const (
	ErrAdministratorRequired = "administrator_required"
	ErrInvalidRequest        = "invalid_request"
	ErrNotFound              = "not_found"
)

// Error is a refused action.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Kind + ": " + e.Msg }

// AsError returns err as an *Error when it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Answer is what a successful action reports.
type Answer struct {
	Outcome        string     `json:"outcome"`
	LendingEnabled *bool      `json:"lending_enabled,omitempty"`
	Resource       string     `json:"resource,omitempty"`
	Enabled        *bool      `json:"enabled,omitempty"`
	DebugUntil     *time.Time `json:"debug_until,omitempty"`
}

// Debug window bounds, in minutes.
const (
	MinDebugMinutes = 1
	MaxDebugMinutes = 240
)

// Service performs admin actions on the daemon's state.
type Service struct {
	sw    *lending.Switches
	level *slog.LevelVar
	base  slog.Level
	log   *slog.Logger
	now   func() time.Time
	// minute is the debug window's unit; tests shorten it.
	minute time.Duration

	mu         sync.Mutex
	debugUntil time.Time
	debugTimer *time.Timer
}

// New returns a Service over the switches. level is the daemon's log level,
// which the debug window lowers to debug and then restores.
func New(sw *lending.Switches, level *slog.LevelVar, log *slog.Logger) *Service {
	if level == nil {
		level = new(slog.LevelVar)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{sw: sw, level: level, base: level.Level(), log: log, now: time.Now, minute: time.Minute}
}

// Switches returns the switches the service acts on.
func (s *Service) Switches() *lending.Switches { return s.sw }

func ptr[T any](v T) *T { return &v }

func (s *Service) lendingAnswer() Answer {
	return Answer{Outcome: "lending", LendingEnabled: ptr(s.sw.State().LendingEnabled)}
}

// Pause turns lending off. Anyone who reached the action may pause; pausing
// an already paused service keeps the first pauser.
func (s *Service) Pause(c Caller) Answer {
	if s.sw.Pause(lending.Pauser{Account: c.Account, Via: c.Via}) {
		s.log.Info("lending paused", "account", c.Account, "via", c.Via)
	}
	return s.lendingAnswer()
}

// Resume turns lending back on. The account that paused may resume its own
// pause; any other caller, and any pause that names no account, needs an
// administrator.
func (s *Service) Resume(c Caller) (Answer, error) {
	st := s.sw.State()
	if !st.LendingEnabled && !c.Administrator {
		by := st.PausedBy
		if by == nil || by.Account == "" || by.Account != c.Account {
			return Answer{}, &Error{Kind: ErrAdministratorRequired, Msg: "lending was paused by another account or channel; resuming it needs an administrator"}
		}
	}
	if s.sw.Resume() {
		s.log.Info("lending resumed", "account", c.Account, "via", c.Via)
	}
	return s.lendingAnswer(), nil
}

// SetResource switches a resource. It needs an administrator.
func (s *Service) SetResource(c Caller, id string, enabled bool) (Answer, error) {
	if !c.Administrator {
		return Answer{}, &Error{Kind: ErrAdministratorRequired, Msg: "switching a resource needs an administrator"}
	}
	if err := s.sw.SetResource(id, enabled); err != nil {
		return Answer{}, &Error{Kind: ErrNotFound, Msg: err.Error()}
	}
	s.log.Info("resource switched", "resource", id, "enabled", enabled, "account", c.Account, "via", c.Via)
	return Answer{Outcome: "resource", Resource: id, Enabled: ptr(enabled)}, nil
}

// StartDebug logs at debug level for the given minutes (1 to 240), then
// returns to the configured level. Starting again moves the end.
func (s *Service) StartDebug(c Caller, minutes int) (Answer, error) {
	if !c.Administrator {
		return Answer{}, &Error{Kind: ErrAdministratorRequired, Msg: "the debug window needs an administrator"}
	}
	if minutes < MinDebugMinutes || minutes > MaxDebugMinutes {
		return Answer{}, &Error{Kind: ErrInvalidRequest, Msg: fmt.Sprintf("minutes must be from %d to %d, got %d", MinDebugMinutes, MaxDebugMinutes, minutes)}
	}
	d := time.Duration(minutes) * s.minute
	s.mu.Lock()
	defer s.mu.Unlock()
	s.debugUntil = s.now().Add(d)
	if s.debugTimer != nil {
		s.debugTimer.Stop()
	}
	s.debugTimer = time.AfterFunc(d, func() { s.endDebug("expired") })
	s.level.Set(slog.LevelDebug)
	s.log.Info("debug logging window opened", "until", s.debugUntil, "account", c.Account, "via", c.Via)
	return Answer{Outcome: "debug", DebugUntil: ptr(s.debugUntil)}, nil
}

// EndDebug closes the debug window early.
func (s *Service) EndDebug(c Caller) (Answer, error) {
	if !c.Administrator {
		return Answer{}, &Error{Kind: ErrAdministratorRequired, Msg: "the debug window needs an administrator"}
	}
	s.endDebug("ended by " + c.Via)
	return Answer{Outcome: "debug"}, nil
}

func (s *Service) endDebug(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.debugTimer != nil {
		s.debugTimer.Stop()
		s.debugTimer = nil
	}
	if !s.debugUntil.IsZero() {
		s.debugUntil = time.Time{}
		s.level.Set(s.base)
		s.log.Info("debug logging window closed", "why", why)
	}
}

// DebugUntil returns when the debug window ends; zero when closed.
func (s *Service) DebugUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.debugUntil
}

// Close stops the debug timer.
func (s *Service) Close() { s.endDebug("shutdown") }
