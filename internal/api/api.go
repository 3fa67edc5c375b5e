// Package api serves vacancyd's API listener: health and readiness probes,
// Prometheus metrics and, in later versions, status and administration.
//
// Routes are data: every route names the scope a caller needs, so that an
// authentication middleware can wrap each route with the check it requires.
// Errors on this listener are JSON answers built with package httperr.
package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/httperr"
	"github.com/vacancyd/vacancyd/internal/settings"
)

// Scopes a route may require. ScopeNone routes are never authenticated.
const (
	ScopeNone  = "none"
	ScopeRead  = config.ScopeRead
	ScopeAdmin = config.ScopeAdmin
)

// Route is one endpoint of the API listener.
type Route struct {
	// Method is the HTTP method; GET routes also answer HEAD.
	Method string
	// Path is a net/http ServeMux path, which may hold wildcards ("/admin/work/{id}/release").
	Path string
	// Scope is what a caller needs: ScopeNone, ScopeRead or ScopeAdmin.
	Scope string
	// LoopbackAllowed marks the admin routes a trusted loopback client may
	// use on Linux and Windows (pausing, and the admin reads).
	LoopbackAllowed bool
	// Handler serves the route.
	Handler http.Handler
}

// Pattern returns the ServeMux pattern of r ("GET /healthz").
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// ReadyFunc reports whether the daemon is ready to serve.
type ReadyFunc func() bool

// Middleware wraps a route's handler, knowing the route (and so its scope).
type Middleware func(r Route, next http.Handler) http.Handler

// Options configure an API.
type Options struct {
	// Log receives handler errors; nil discards them.
	Log *slog.Logger
	// Ready answers /readyz; nil means always ready.
	Ready ReadyFunc
	// Registry is what /metrics exposes; nil means a new NewRegistry().
	Registry *prometheus.Registry
	// Wrap, when set, wraps every route's handler (authentication goes here).
	// A known path asked with another method is wrapped with the strictest
	// requirement among that path's routes, so that no method (OPTIONS
	// included) reaches even a 405 without passing authentication.
	Wrap Middleware
	// Admin performs admin actions; nil leaves the admin routes out.
	Admin *admin.Service
	// Status returns the /status document; nil leaves /status out.
	Status func() any
	// Diagnostics returns the /admin/diagnostics document.
	Diagnostics func() any
	// Settings reads and saves the settings document.
	Settings SettingsService
	// ReleaseWork drops held work (POST /admin/work/{id}/release).
	ReleaseWork func(ctx context.Context, c admin.Caller, id uint64, upstreamStopped bool) error
}

// SettingsService is the settings contract behind GET and POST /admin/settings.
type SettingsService interface {
	// Get returns the saved settings and their revision.
	Get() (settings.Document, error)
	// Save validates, writes and applies a document. Its errors are
	// settings.ErrStale, settings.ErrNoFile, *config.InvalidError (with every
	// problem) or an I/O error.
	Save(settings.Document) (settings.Result, config.Problems, error)
}

// API is the API listener's set of routes.
type API struct {
	opts   Options
	log    *slog.Logger
	ready  ReadyFunc
	reg    *prometheus.Registry
	wrap   Middleware
	routes []Route
}

// New returns the API with its built-in routes.
func New(opts Options) *API {
	a := &API{opts: opts, log: opts.Log, ready: opts.Ready, reg: opts.Registry, wrap: opts.Wrap}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.ready == nil {
		a.ready = func() bool { return true }
	}
	if a.reg == nil {
		a.reg = NewRegistry()
	}
	a.routes = []Route{
		{Method: http.MethodGet, Path: "/healthz", Scope: ScopeNone, Handler: http.HandlerFunc(healthz)},
		{Method: http.MethodGet, Path: "/readyz", Scope: ScopeNone, Handler: http.HandlerFunc(a.readyz)},
		{Method: http.MethodGet, Path: "/metrics", Scope: ScopeRead, Handler: metricsHandler(a.reg, a.log)},
	}
	if opts.Status != nil {
		a.routes = append(a.routes, Route{Method: http.MethodGet, Path: "/status", Scope: ScopeRead, Handler: jsonHandler(opts.Status)})
	}
	if opts.Admin != nil {
		a.routes = append(a.routes, a.adminRoutes()...)
	}
	return a
}

// Registry returns the registry /metrics exposes; other packages register
// their collectors on it.
func (a *API) Registry() *prometheus.Registry { return a.reg }

// Routes returns a copy of the route table.
func (a *API) Routes() []Route { return slices.Clone(a.routes) }

// Handler returns the http.Handler serving every route. A known path asked
// with another method gets 405 with Allow; an unknown path gets 404.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	var paths []string
	for _, r := range a.routes {
		h := r.Handler
		if a.wrap != nil {
			h = a.wrap(r, h)
		}
		mux.Handle(r.Pattern(), h)
		if _, seen := allowed[r.Path]; !seen {
			paths = append(paths, r.Path)
		}
		allowed[r.Path] = append(allowed[r.Path], r.Method)
		if r.Method == http.MethodGet {
			allowed[r.Path] = append(allowed[r.Path], http.MethodHead)
		}
	}
	// A pattern without a method is less specific than the route's own, so it
	// only catches the methods the route does not serve.
	for _, p := range paths {
		var h http.Handler = methodNotAllowed(allowed[p], a.log)
		if a.wrap != nil {
			h = a.wrap(a.strictest(p), h)
		}
		mux.Handle(p, h)
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httperr.Write(w, &httperr.Error{Status: http.StatusNotFound, Type: "not_found", Msg: "no such endpoint"}, a.log)
	}))
	return mux
}

// strictest returns a pseudo-route for path carrying the strictest
// requirement of its routes: admin over read over none, and loopback allowed
// only if every route on the path allows it.
func (a *API) strictest(path string) Route {
	rank := map[string]int{ScopeNone: 0, ScopeRead: 1, ScopeAdmin: 2}
	out := Route{Method: "*", Path: path, Scope: ScopeNone, LoopbackAllowed: true}
	for _, r := range a.routes {
		if r.Path != path {
			continue
		}
		if rank[r.Scope] > rank[out.Scope] {
			out.Scope = r.Scope
		}
		out.LoopbackAllowed = out.LoopbackAllowed && r.LoopbackAllowed
	}
	return out
}

func methodNotAllowed(methods []string, log *slog.Logger) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httperr.Write(w, &httperr.Error{
			Status: http.StatusMethodNotAllowed,
			Type:   "method_not_allowed",
			Msg:    fmt.Sprintf("method %s is not allowed here; use %s", r.Method, allow),
			Header: http.Header{"Allow": {allow}},
		}, log)
	})
}

func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body+"\n")
}

// healthz answers 200 while the process serves at all.
func healthz(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") }

// readyz answers 200 when ready and 503 otherwise; it says nothing more, as it
// is never authenticated.
func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if a.ready() {
		writeText(w, http.StatusOK, "ready")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "not ready")
}
