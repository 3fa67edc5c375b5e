package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/settings"
)

// live is the running configuration and what applies a new one: saves over
// the settings API and SIGHUP reloads both end here.
type live struct {
	cfg atomic.Pointer[config.Config]
	// started is the configuration the process started with.
	started *config.Config
	store   *settings.Store
	authn   *auth.Authenticator
	gates   []*gate.Gate // in config order
	lending *lendingParts
	mu      sync.Mutex // one apply at a time
	log     *slog.Logger
}

// Save validates and writes a settings document, then applies it.
func (l *live) Save(doc settings.Document) (settings.Result, config.Problems, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next, ps, rev, err := l.store.Save(doc)
	if err != nil {
		return settings.Result{}, ps, err
	}
	res := l.applyLocked(next)
	res.Revision = rev
	res.Warnings = problemStrings(ps.Warnings())
	l.log.Info("settings saved", "revision", rev, "applied", res.Applied, "restart_required", res.RestartRequired)
	return res, nil, nil
}

// Reload re-reads the file (SIGHUP). An invalid file changes nothing.
func (l *live) Reload() (settings.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next, ps, rev, err := l.store.Load()
	if err != nil {
		var inv *config.InvalidError
		if errors.As(err, &inv) {
			for _, p := range inv.Problems {
				l.log.Error("reload refused: config error", "key", p.Key, "problem", p.Message)
			}
		}
		return settings.Result{}, err
	}
	for _, p := range ps {
		l.log.Warn("config warning", "key", p.Key, "problem", p.Message)
	}
	res := l.applyLocked(next)
	res.Revision = rev
	l.log.Info("configuration reloaded", "revision", rev, "applied", res.Applied, "restart_required", res.RestartRequired)
	return res, nil
}

func problemStrings(ps config.Problems) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// applyLocked puts next into effect as far as it can without reopening
// listeners, and names what waits for a restart.
func (l *live) applyLocked(next *config.Config) settings.Result {
	// What needs a restart is judged against what the process started
	// with (its listeners, sockets and sources), so that it keeps being
	// reported until the restart happens.
	cur := l.started
	res := settings.Result{Applied: []string{}, RestartRequired: []string{}}
	restart := func(key string) { res.RestartRequired = append(res.RestartRequired, key) }

	if next.Server.Listen != cur.Server.Listen {
		restart("server.listen")
	}
	if next.Server.AdminSocket != cur.Server.AdminSocket {
		restart("server.admin_socket")
	}
	if next.Server.AdminGroup != cur.Server.AdminGroup {
		restart("server.admin_group")
	}
	cl, nl := cur.Server.Limits, next.Server.Limits
	if cl.MaxConnections != nl.MaxConnections || cl.HeaderTimeout.Duration != nl.HeaderTimeout.Duration ||
		cl.IdleTimeout.Duration != nl.IdleTimeout.Duration || cl.BodyBudgetBytes != nl.BodyBudgetBytes {
		restart("server.limits (connections, header and idle timeouts, body budget)")
	}
	if cur.Presence.GPUPressurePath != next.Presence.GPUPressurePath || cur.Presence.NVML != next.Presence.NVML ||
		!slices.Equal(cur.Presence.Sources, next.Presence.Sources) || cur.Presence.InputDevices != next.Presence.InputDevices ||
		!slices.Equal(cur.Presence.Programs, next.Presence.Programs) {
		restart("presence (sources, input_devices, programs, gpu_pressure_file, nvml)")
	}
	// Startup states: the running switches change with pause, resume and
	// the resource switches, not with the file.
	if cur.Lending.Enabled != next.Lending.Enabled {
		restart("lending.enabled (the state at start; pause or resume to change it now)")
	}
	for i, r := range next.Resources {
		if j := slices.IndexFunc(cur.Resources, func(c config.Resource) bool { return c.ID == r.ID }); j >= 0 && cur.Resources[j].IsEnabled() != r.IsEnabled() {
			restart(fmt.Sprintf("resource[%d].enabled (the state at start; switch the resource to change it now)", i))
		}
	}
	if !slices.Equal(resourceIDs(cur), resourceIDs(next)) {
		restart("resource (added, removed or renamed)")
	}

	if err := l.authn.Update(next.Auth); err != nil {
		// Validation passed, so this is not expected; keep the old auth.
		l.log.Error("auth settings not applied", "err", err)
		restart("auth")
	} else {
		res.Applied = append(res.Applied, "auth")
	}

	if sameGates(cur, next) {
		for i, u := range next.Upstreams {
			if err := l.updateGate(i, u, next); err != nil {
				l.log.Error("upstream settings not applied", "upstream", u.ID, "err", err)
				restart(fmt.Sprintf("upstream[%d]", i))
				continue
			}
			res.Applied = append(res.Applied, fmt.Sprintf("upstream[%d] (%s)", i, u.ID))
		}
		res.Applied = append(res.Applied, "server.limits (body size, body and response timeouts)")
	} else {
		restart("upstream (added, removed, or id, kind or listen changed)")
	}
	if err := l.lending.apply(next); err != nil {
		l.log.Error("lending settings not applied", "err", err)
		restart("lending")
	} else {
		res.Applied = append(res.Applied, "lending", "presence")
	}
	l.cfg.Store(next)
	return res
}

func (l *live) updateGate(i int, u config.Upstream, cfg *config.Config) error {
	ad, err := adapter.For(u.Kind, adapter.Options{MaxKeepAlive: u.MaxKeepAlive.Duration})
	if err != nil {
		return err
	}
	return l.gates[i].Update(gate.Options{Upstream: u, Limits: cfg.Server.Limits, Adapter: ad, RetryAfter: cfg.Lending.RetryAfter.Duration})
}

// sameGates reports whether both configs have the same gates: same ids,
// kinds and listen addresses in the same order.
func sameGates(a, b *config.Config) bool {
	if len(a.Upstreams) != len(b.Upstreams) {
		return false
	}
	for i := range a.Upstreams {
		x, y := a.Upstreams[i], b.Upstreams[i]
		if x.ID != y.ID || x.Kind != y.Kind || x.Listen != y.Listen {
			return false
		}
	}
	return true
}

func resourceIDs(c *config.Config) []string {
	ids := make([]string, len(c.Resources))
	for i, r := range c.Resources {
		ids[i] = r.ID
	}
	return ids
}

// Get returns the saved settings document.
func (l *live) Get() (settings.Document, error) { return l.store.Get() }
