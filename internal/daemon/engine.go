package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// lendingParts are the lending engine and what it reclaims through.
type lendingParts struct {
	engine    *lending.Engine
	upstreams *upstreams
	client    *http.Client
}

// newLending builds the engine over the switches; Run starts it.
func newLending(cfg *config.Config, switches *lending.Switches, reg prometheus.Registerer, log *slog.Logger) (*lendingParts, error) {
	client := &http.Client{Transport: gate.NewTransport()}
	ups, err := newUpstreams(cfg, client)
	if err != nil {
		return nil, err
	}
	m, err := lending.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("lending metrics: %w", err)
	}
	ids := make([]string, len(cfg.Resources))
	for i, r := range cfg.Resources {
		ids[i] = r.ID
	}
	e := lending.NewEngine(lending.EngineOptions{
		Policy:    lending.PolicyFrom(cfg),
		Switches:  switches,
		Resources: ids,
		Reclaimer: ups,
		Metrics:   m,
		Log:       log,
	})
	return &lendingParts{engine: e, upstreams: ups, client: client}, nil
}

// run starts the engine; the returned function stops it and waits.
func (l *lendingParts) run(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.engine.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// apply puts a new configuration's lending policy and upstream targets into
// effect.
func (l *lendingParts) apply(cfg *config.Config) error {
	l.engine.SetPolicy(lending.PolicyFrom(cfg))
	return l.upstreams.update(cfg, l.client)
}
