// Package daemon wires vacancyd together: it opens the listeners a
// configuration names, serves them, and shuts them down gracefully when its
// context ends.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/api"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/settings"
)

// ShutdownTimeout bounds how long in-flight requests may finish after the
// daemon is told to stop; connections still open after it are closed.
const ShutdownTimeout = 10 * time.Second

// Run serves cfg until ctx ends, then shuts down gracefully. Every listener is
// opened before any is served, so a listener that cannot open fails the start
// with an error naming its config key ("server.listen: listen tcp ...").
// level is the logger's level, which the admin debug window lowers; nil
// gives the window a level of its own that affects nothing.
// Run returns nil after a shutdown that ctx asked for.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, level *slog.LevelVar) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	errs := &recent{}
	log = slog.New(&recordingHandler{Handler: log.Handler(), rec: errs})
	started := time.Now()
	var ready atomic.Bool
	reg := api.NewRegistry()

	authn, err := auth.New(cfg.Auth, auth.Options{Logger: log, Registerer: reg})
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	resources := map[string]bool{}
	for _, r := range cfg.Resources {
		resources[r.ID] = r.IsEnabled()
	}
	switches := lending.NewSwitches(cfg.Lending.Enabled, resources)
	adm := admin.New(switches, level, log.With("component", "admin"))
	defer adm.Close()
	lend, err := newLending(cfg, switches, reg, log)
	if err != nil {
		return err
	}

	lv := &live{store: settings.NewStore(cfg.Path, config.Options{}), authn: authn, lending: lend, started: cfg, log: log.With("component", "settings")}
	lv.cfg.Store(cfg)
	st := &statusSource{live: lv, started: started, auth: authn, switches: switches, admin: adm, recent: errs, engine: lend.engine}
	a := api.New(api.Options{
		Log:         log.With("component", "api"),
		Ready:       func() bool { return ready.Load() && lend.engine.Ready() },
		Registry:    reg,
		Wrap:        authMiddleware(authn),
		Admin:       adm,
		Status:      st.status,
		Diagnostics: st.diagnostics,
		Settings:    lv,
		ReleaseWork: workReleaser{lend.engine, log.With("component", "admin")}.ReleaseWork,
	})

	eps := []endpoint{
		{key: "server.listen", name: "api", addr: cfg.Server.Listen, handler: a.Handler(), log: log.With("component", "api")},
	}
	gates, err := buildGates(cfg, authn, lend.engine, reg, log)
	if err != nil {
		return err
	}
	lv.gates = gates
	for i, g := range gates {
		u := cfg.Upstreams[i]
		eps = append(eps, endpoint{key: fmt.Sprintf("upstream[%d].listen", i), name: u.ID, addr: u.Listen, handler: g, log: log.With("component", "gate", "upstream", u.ID)})
	}
	servers, err := listenAll(cfg.Server.Limits, eps)
	if err != nil {
		return err
	}
	for _, s := range servers {
		authn.WarnIfExposed(s.name, s.ln.Addr())
		st.listeners = append(st.listeners, api.ListenerStatus{Name: s.name, Key: s.key, Addr: s.addr})
	}

	stopEngine := lend.run(ctx)
	defer stopEngine()

	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.serve() }()
	}
	ready.Store(true)

	sock := adminsock.NewServer(adminsock.Options{
		Path:       cfg.Server.AdminSocket,
		AdminGroup: cfg.Server.AdminGroup,
		Log:        log,
	}, admin.Handlers{Service: adm, Settings: socketSettings{lv}, Work: workReleaser{lend.engine, log.With("component", "admin")}, Presence: lend.sessions, Log: log.With("component", "admin")})
	st.adminChannel = sock.State
	sockCtx, stopSock := context.WithCancel(context.WithoutCancel(ctx))
	sockDone := make(chan struct{})
	go func() {
		defer close(sockDone)
		if err := sock.Run(sockCtx); err != nil && !errors.Is(err, adminsock.ErrNotSupported) {
			log.Error("admin socket stopped", "err", err)
		}
	}()
	defer func() { stopSock(); <-sockDone }()

	reload, stopReload := notifyReload()
	defer stopReload()
	var runErr error
wait:
	for {
		select {
		case <-reload:
			_, _ = lv.Reload() // logs its own outcome
		case <-ctx.Done():
			log.Info("shutting down", "timeout", ShutdownTimeout.String())
			break wait
		case runErr = <-errc:
			log.Error("listener failed; shutting down", "err", runErr)
			break wait
		}
	}
	ready.Store(false)

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.shutdown(sctx); err != nil {
			log.Warn("graceful shutdown did not finish; closing connections", "listener", s.addr, "err", err)
		}
	}
	if runErr != nil {
		return runErr
	}
	log.Info("stopped")
	return nil
}

func wrapKey(key string, err error) error { return fmt.Errorf("%s: %w", key, err) }
