package daemon

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/adapter"
	_ "github.com/vacancyd/vacancyd/internal/adapter/all" // every upstream kind
	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/api"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/version"
)

// authMiddleware puts the authenticator in front of every API route that
// needs a scope. Every /admin/ route is an admin route: intent header, no
// Origin, and loopback only where the route allows it.
func authMiddleware(a *auth.Authenticator) api.Middleware {
	return func(r api.Route, next http.Handler) http.Handler {
		var scope auth.Scope
		switch r.Scope {
		case api.ScopeNone:
			return next
		case api.ScopeRead:
			scope = auth.Read
		default:
			scope = auth.Admin
		}
		return a.Require(auth.Requirement{
			Scope:           scope,
			Admin:           strings.HasPrefix(r.Path, "/admin/"),
			LoopbackAllowed: r.LoopbackAllowed,
		}, next)
	}
}

// statusSource builds the documents of /status, /admin/diagnostics and
// GET /admin/settings from the running daemon.
type statusSource struct {
	live      *live
	started   time.Time
	auth      *auth.Authenticator
	switches  *lending.Switches
	admin     *admin.Service
	listeners []api.ListenerStatus
	// adminChannel reports the local admin channel (socket or pipe).
	adminChannel func() adminsock.State
	recent       *recent
	engine       *lending.Engine
}

func (s *statusSource) status() any {
	cfg := s.live.cfg.Load()
	doc := api.Status{
		Version:   version.Version,
		StartedAt: s.started.UTC(),
		UptimeS:   time.Since(s.started).Seconds(),
		Lending:   s.switches.State(),
		Listeners: s.listeners,
		Auth:      s.auth.Posture(),
		State:     s.engine.Status(),
	}
	if s.adminChannel != nil {
		ac := s.adminChannel()
		doc.AdminChannel = &ac
	}
	if t := s.admin.DebugUntil(); !t.IsZero() {
		doc.DebugUntil = &t
	}
	for _, u := range cfg.Upstreams {
		doc.Upstreams = append(doc.Upstreams, api.UpstreamStatus{ID: u.ID, Kind: u.Kind, Listen: u.Listen, Target: config.RedactURL(u.Target), Resource: u.Resource})
	}
	return doc
}

func (s *statusSource) diagnostics() any {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return map[string]any{
		"build": map[string]any{
			"version":    version.Version,
			"revision":   version.Revision,
			"go_version": version.GoVersion,
		},
		"runtime": map[string]any{
			"os":             runtime.GOOS,
			"arch":           runtime.GOARCH,
			"pid":            os.Getpid(),
			"goroutines":     runtime.NumGoroutine(),
			"heap_in_use":    ms.HeapInuse,
			"started_at":     s.started.UTC(),
			"uptime_seconds": time.Since(s.started).Seconds(),
			"gomaxprocs":     runtime.GOMAXPROCS(0),
			"num_cpu":        runtime.NumCPU(),
			"total_alloc":    ms.TotalAlloc,
			"gc_cycles":      ms.NumGC,
			"next_gc_target": ms.NextGC,
			"config_path":    s.live.cfg.Load().Path,
		},
		// The effective configuration: secrets print as redacted.
		"config": s.live.cfg.Load(),
		"inputs": map[string]any{
			"lending":       s.switches.State(),
			"engine":        s.engine.Status(),
			"admin_channel": s.adminChannelState(),
			"debug_until":   nonZeroTime(s.admin.DebugUntil()),
		},
		"listeners":     s.listeners,
		"recent_errors": s.recent.list(),
	}
}

func (s *statusSource) adminChannelState() *adminsock.State {
	if s.adminChannel == nil {
		return nil
	}
	st := s.adminChannel()
	return &st
}

func nonZeroTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// buildGates makes one gate per upstream, in config order, sharing the body
// budget, the metrics and the authenticator.
func buildGates(cfg *config.Config, authn *auth.Authenticator, admit lending.Admitter, reg prometheus.Registerer, log *slog.Logger) ([]*gate.Gate, error) {
	budget := gate.NewBudget(cfg.Server.Limits.BodyBudgetBytes)
	metrics, err := gate.NewMetrics(reg, budget)
	if err != nil {
		return nil, fmt.Errorf("gate metrics: %w", err)
	}
	tr := gate.NewTransport()
	var gates []*gate.Gate
	for i, u := range cfg.Upstreams {
		ad, err := adapter.For(u.Kind, adapter.Options{MaxKeepAlive: u.MaxKeepAlive.Duration})
		if err != nil {
			return nil, fmt.Errorf("upstream[%d].kind: %w", i, err)
		}
		g, err := gate.New(gate.Options{
			Upstream:   u,
			Limits:     cfg.Server.Limits,
			Auth:       authn,
			Adapter:    ad,
			Admitter:   admit,
			Budget:     budget,
			Metrics:    metrics,
			RetryAfter: cfg.Lending.RetryAfter.Duration,
			Transport:  tr,
			Log:        log,
		})
		if err != nil {
			return nil, err
		}
		gates = append(gates, g)
	}
	return gates, nil
}
