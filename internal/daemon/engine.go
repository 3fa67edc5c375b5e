package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/presence/gpu"
)

// lendingParts are the lending engine and what it reclaims through.
type lendingParts struct {
	engine    *lending.Engine
	upstreams *upstreams
	client    *http.Client
	cfg       *config.Config
	log       *slog.Logger
	nvml      *gpu.NVMLSource // nil when presence.nvml = "off"
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
	l := &lendingParts{engine: e, upstreams: ups, client: client, cfg: cfg, log: log}
	if gpu.NVMLEnabled(cfg) {
		l.nvml = gpu.NewNVMLSource(e, gpu.SettingsFrom(cfg), gpu.NVMLOptions{Log: log.With("component", "nvml")})
	}
	return l, nil
}

// run starts the engine; the returned function stops it and waits.
func (l *lendingParts) run(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var sources sync.WaitGroup
	start := func(name string, run func(context.Context) error) {
		sources.Add(1)
		go func() {
			defer sources.Done()
			if err := run(ctx); err != nil && ctx.Err() == nil {
				l.log.Error("input source stopped", "source", name, "err", err)
			}
		}()
	}
	go func() {
		defer close(done)
		l.engine.Run(ctx)
	}()
	if l.nvml != nil {
		start(lending.SourceNVML, l.nvml.Run)
	}
	if p := l.cfg.Presence.GPUPressurePath; p != "" {
		ids := make([]string, len(l.cfg.Resources))
		for i, r := range l.cfg.Resources {
			ids[i] = r.ID
		}
		fs := gpu.NewFileSource(l.engine, p, gpu.FileOptions{Resources: ids, Log: l.log.With("component", "pressure-file")})
		start(lending.SourcePressureFile, fs.Run)
	}
	return func() { cancel(); sources.Wait(); <-done }
}

// apply puts a new configuration's lending policy and upstream targets into
// effect.
func (l *lendingParts) apply(cfg *config.Config) error {
	l.engine.SetPolicy(lending.PolicyFrom(cfg))
	if l.nvml != nil {
		l.nvml.Update(gpu.SettingsFrom(cfg))
	}
	return l.upstreams.update(cfg, l.client)
}
