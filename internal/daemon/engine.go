package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/presence"
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
	sessions  *presence.Sessions
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
	opts := lending.EngineOptions{
		Policy:    lending.PolicyFrom(cfg),
		Switches:  switches,
		Resources: ids,
		Reclaimer: ups,
		Metrics:   m,
		Log:       log,
	}
	l := &lendingParts{upstreams: ups, client: client, cfg: cfg, log: log}
	// The NVML source reports to the engine and the engine asks it about
	// VRAM, so the source gets the engine through a forwarding sink.
	fwd := &sinkForwarder{}
	if gpu.NVMLEnabled(cfg) {
		l.nvml = gpu.NewNVMLSource(fwd, gpu.SettingsFrom(cfg), gpu.NVMLOptions{Log: log})
		idx := map[string]int{}
		for _, r := range cfg.Resources {
			idx[r.ID] = r.GPUIndex
		}
		opts.VRAM = nvmlVRAM{src: l.nvml, index: idx}
	}
	l.engine = lending.NewEngine(opts)
	fwd.Sink = l.engine
	l.sessions = presence.NewSessions(l.engine, cfg.Presence.SessionTimeout.Duration, log)
	return l, nil
}

// sinkForwarder lets a source be built before the engine it reports to.
type sinkForwarder struct{ lending.Sink }

// nvmlVRAM answers the engine's VRAM questions by resource id.
type nvmlVRAM struct {
	src   *gpu.NVMLSource
	index map[string]int
}

func (v nvmlVRAM) BorrowedMemory(resource string) (uint64, bool) {
	i, ok := v.index[resource]
	if !ok {
		return 0, false
	}
	return v.src.BorrowedMemory(i)
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
	l.startPresence(start)
	if p := l.cfg.Presence.GPUPressurePath; p != "" {
		ids := make([]string, len(l.cfg.Resources))
		for i, r := range l.cfg.Resources {
			ids[i] = r.ID
		}
		fs := gpu.NewFileSource(l.engine, p, gpu.FileOptions{Resources: ids, Log: l.log})
		start(lending.SourcePressureFile, fs.Run)
	}
	return func() { cancel(); sources.Wait(); <-done }
}

// apply puts a new configuration's lending policy and upstream targets into
// effect.
func (l *lendingParts) apply(cfg *config.Config) error {
	// The sources run as started until a restart: keep deciding by them.
	p, started := lending.PolicyFrom(cfg), lending.PolicyFrom(l.cfg)
	p.PresenceSources, p.RequiredPressure = started.PresenceSources, started.RequiredPressure
	l.engine.SetPolicy(p)
	if l.nvml != nil {
		l.nvml.Update(gpu.SettingsFrom(cfg))
	}
	l.sessions.SetTimeout(cfg.Presence.SessionTimeout.Duration)
	return l.upstreams.update(cfg, l.client)
}

// startPresence starts the configured presence sources. Session reports
// arrive over the admin channel (Sessions); on macOS the input-devices
// source is the HID system's idle time.
func (l *lendingParts) startPresence(start func(string, func(context.Context) error)) {
	sink := l.engine
	for _, src := range l.cfg.Presence.Sources {
		switch src {
		case config.SourceSession:
			start("sessions", l.sessions.Run)
		case config.SourceInputDevices:
			if runtime.GOOS == "darwin" {
				h := &presence.HIDIdle{Log: l.log}
				start(lending.SourceHIDIdle, func(ctx context.Context) error { return h.Run(ctx, sink) })
				continue
			}
			d := &presence.InputDevices{Glob: l.cfg.Presence.InputDevices, Log: l.log}
			start(lending.SourceInputDevices, func(ctx context.Context) error { return d.Run(ctx, sink) })
		case config.SourcePrograms:
			p := &presence.Programs{Names: l.cfg.Presence.Programs, Log: l.log}
			start(lending.SourcePrograms, func(ctx context.Context) error { return p.Run(ctx, sink) })
		}
	}
}
