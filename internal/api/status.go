package api

import (
	"time"

	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// Status is the document GET /status serves and vacancyd status reads.
type Status struct {
	Version      string              `json:"version"`
	StartedAt    time.Time           `json:"started_at"`
	UptimeS      float64             `json:"uptime_seconds"`
	Lending      lending.SwitchState `json:"lending"`
	Listeners    []ListenerStatus    `json:"listeners"`
	AdminChannel *adminsock.State    `json:"admin_channel,omitempty"`
	DebugUntil   *time.Time          `json:"debug_until,omitempty"`
	Upstreams    []UpstreamStatus    `json:"upstreams"`
	Auth         auth.Posture        `json:"auth"`
	// State is the lending engine's view: owner presence, every input and
	// its readiness, each resource's verdict, and the borrowed work.
	State lending.Status `json:"state"`
}

// ListenerStatus is one open listener.
type ListenerStatus struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Addr string `json:"addr"`
}

// UpstreamStatus is one gate and its upstream; Target has any credentials
// and query replaced by ***.
type UpstreamStatus struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Listen   string `json:"listen"`
	Target   string `json:"target"`
	Resource string `json:"resource"`
}
