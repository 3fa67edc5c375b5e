// Package daemon wires vacancyd together: it opens the listeners a
// configuration names, serves them, and shuts them down gracefully when its
// context ends.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/api"
	"github.com/vacancyd/vacancyd/internal/config"
)

// ShutdownTimeout bounds how long in-flight requests may finish after the
// daemon is told to stop; connections still open after it are closed.
const ShutdownTimeout = 10 * time.Second

// Run serves cfg until ctx ends, then shuts down gracefully. Every listener is
// opened before any is served, so a listener that cannot open fails the start
// with an error naming its config key ("server.listen: listen tcp ...").
// Run returns nil after a shutdown that ctx asked for.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var ready atomic.Bool
	reg := api.NewRegistry()
	a := api.New(api.Options{
		Log:      log.With("component", "api"),
		Ready:    ready.Load,
		Registry: reg,
	})

	servers, err := listenAll(cfg.Server.Limits, []endpoint{
		{key: "server.listen", addr: cfg.Server.Listen, handler: a.Handler(), log: log.With("component", "api")},
	})
	if err != nil {
		return err
	}

	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.serve() }()
	}
	ready.Store(true)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", ShutdownTimeout.String())
	case runErr = <-errc:
		log.Error("listener failed; shutting down", "err", runErr)
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
