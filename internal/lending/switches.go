// Package lending decides whether borrowed work may run on a resource. This
// file holds the owner's switches (lending paused or enabled, and who paused;
// each resource enabled or disabled) and the admission interface the gates
// use. The full engine (presence, GPU pressure, reclaim) builds on it.
package lending

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Reason says why a resource is not lendable. The values appear in /status,
// in 503 bodies and as metric labels.
type Reason string

// Reasons a resource is not lendable.
const (
	ReasonNone             Reason = ""
	ReasonOwnerPresent     Reason = "owner_present"
	ReasonGPUPressure      Reason = "gpu_pressure"
	ReasonLendingPaused    Reason = "lending_paused"
	ReasonResourceDisabled Reason = "resource_disabled"
	ReasonOutsideWindow    Reason = "outside_window"
	ReasonPresenceUnknown  Reason = "presence_unknown"
	ReasonReclaiming       Reason = "reclaiming"
)

// Pauser identifies who paused lending. The zero value is an anonymous pause
// (TCP loopback or a token), which only an administrator may resume.
type Pauser struct {
	// Account is a uid ("uid:1000") or Windows account; empty when unknown.
	Account string `json:"account"`
	// Via says how the pause arrived: "http", "socket", "pipe".
	Via string `json:"via"`
}

// Admitter admits borrowed work and registers it, so that a reclaim can
// end it. The Engine is the Admitter.
type Admitter interface {
	// Acquire admits work on spec.Resource now or says why not. The
	// returned context ends when a reclaim cancels the work; the caller
	// ends the work (Work.End) when it finishes, or hands a job that
	// outlives the request to TrackJob.
	Acquire(ctx context.Context, spec WorkSpec) (context.Context, *Work, Reason)
	// TrackJob watches a job until the upstream reports it done.
	TrackJob(w *Work)
}

// Switches are the owner's switches. Safe for concurrent use.
type Switches struct {
	mu        sync.RWMutex
	enabled   bool
	pausedBy  Pauser
	pausedAt  time.Time
	resources map[string]bool
	order     []string
	now       func() time.Time
	changed   chan struct{}
}

// NewSwitches returns switches at their configured startup values.
func NewSwitches(lendingEnabled bool, resources map[string]bool) *Switches {
	s := &Switches{enabled: lendingEnabled, resources: map[string]bool{}, now: time.Now, changed: make(chan struct{})}
	for id, on := range resources {
		s.resources[id] = on
		s.order = append(s.order, id)
	}
	slices.Sort(s.order)
	return s
}

// Changed returns a channel closed at the next change of any switch.
func (s *Switches) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

func (s *Switches) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Pause turns lending off. Pausing while already paused keeps the first
// pauser, so nobody can take over another account's pause by pausing again.
// It reports whether the state changed.
func (s *Switches) Pause(by Pauser) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled {
		return false
	}
	s.enabled, s.pausedBy, s.pausedAt = false, by, s.now()
	s.notifyLocked()
	return true
}

// Resume turns lending on. Callers check who may resume (PausedBy) first.
func (s *Switches) Resume() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enabled {
		return false
	}
	s.enabled, s.pausedBy, s.pausedAt = true, Pauser{}, time.Time{}
	s.notifyLocked()
	return true
}

// SetResource switches a resource on or off.
func (s *Switches) SetResource(id string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.resources[id]
	if !ok {
		return fmt.Errorf("unknown resource %q", id)
	}
	if cur != on {
		s.resources[id] = on
		s.notifyLocked()
	}
	return nil
}

// SwitchState is a snapshot of the switches.
type SwitchState struct {
	LendingEnabled bool            `json:"lending_enabled"`
	PausedBy       *Pauser         `json:"paused_by,omitempty"`
	PausedAt       *time.Time      `json:"paused_at,omitempty"`
	Resources      map[string]bool `json:"resources"`
}

// State returns a snapshot.
func (s *Switches) State() SwitchState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := SwitchState{LendingEnabled: s.enabled, Resources: make(map[string]bool, len(s.resources))}
	for id, on := range s.resources {
		st.Resources[id] = on
	}
	if !s.enabled {
		by, at := s.pausedBy, s.pausedAt
		st.PausedBy, st.PausedAt = &by, &at
	}
	return st
}

// Admit reports whether the switches alone allow work on resource.
func (s *Switches) Admit(resource string) (bool, Reason) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.enabled {
		return false, ReasonLendingPaused
	}
	if on, ok := s.resources[resource]; !ok || !on {
		return false, ReasonResourceDisabled
	}
	return true, ReasonNone
}
