package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/httperr"
)

// maxAdminBody caps an admin request body.
const maxAdminBody = 1 << 20

// adminRoutes are SPEC section 6's admin routes. Every one needs the intent
// header (the auth middleware enforces it for /admin/ paths).
func (a *API) adminRoutes() []Route {
	svc := a.opts.Admin
	admRoute := func(method, path string, loopback bool, h http.HandlerFunc) Route {
		return Route{Method: method, Path: path, Scope: ScopeAdmin, LoopbackAllowed: loopback, Handler: h}
	}
	return []Route{
		admRoute(http.MethodPost, "/admin/lending/disable", true, func(w http.ResponseWriter, r *http.Request) {
			a.answer(w, svc.Pause(caller(r)), nil)
		}),
		admRoute(http.MethodPost, "/admin/lending/enable", false, func(w http.ResponseWriter, r *http.Request) {
			ans, err := svc.Resume(caller(r))
			a.answer(w, ans, err)
		}),
		admRoute(http.MethodPost, "/admin/resources/{id}/enable", false, func(w http.ResponseWriter, r *http.Request) {
			ans, err := svc.SetResource(caller(r), r.PathValue("id"), true)
			a.answer(w, ans, err)
		}),
		admRoute(http.MethodPost, "/admin/resources/{id}/disable", false, func(w http.ResponseWriter, r *http.Request) {
			ans, err := svc.SetResource(caller(r), r.PathValue("id"), false)
			a.answer(w, ans, err)
		}),
		admRoute(http.MethodPost, "/admin/debug/enable", false, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Minutes *int `json:"minutes"`
			}
			if err := decodeBody(r.Body, &body); err != nil || body.Minutes == nil {
				a.fail(w, &httperr.Error{Status: http.StatusBadRequest, Type: admin.ErrInvalidRequest, Msg: `send {"minutes": 1..240}`, Err: err})
				return
			}
			ans, err := svc.StartDebug(caller(r), *body.Minutes)
			a.answer(w, ans, err)
		}),
		admRoute(http.MethodPost, "/admin/debug/disable", false, func(w http.ResponseWriter, r *http.Request) {
			ans, err := svc.EndDebug(caller(r))
			a.answer(w, ans, err)
		}),
		admRoute(http.MethodGet, "/admin/settings", true, a.getSettings),
		admRoute(http.MethodPost, "/admin/settings", false, a.saveSettings),
		admRoute(http.MethodGet, "/admin/diagnostics", true, jsonHandler(a.opts.Diagnostics).ServeHTTP),
		admRoute(http.MethodPost, "/admin/work/{id}/release", false, a.releaseWork),
	}
}

// caller turns the authenticated principal into an admin caller. A TCP
// caller names no account; it is an administrator when its principal holds
// the admin scope (an admin token, or loopback on macOS).
func caller(r *http.Request) admin.Caller {
	p, _ := auth.PrincipalFrom(r.Context())
	return admin.Caller{Administrator: p.Has(auth.Admin), Via: "http"}
}

func (a *API) answer(w http.ResponseWriter, ans admin.Answer, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, ans)
		return
	}
	status := http.StatusInternalServerError
	typ := "internal"
	if e, ok := admin.AsError(err); ok {
		typ = e.Kind
		switch e.Kind {
		case admin.ErrAdministratorRequired:
			status = http.StatusForbidden
		case admin.ErrInvalidRequest:
			status = http.StatusBadRequest
		case admin.ErrNotFound:
			status = http.StatusNotFound
		}
		a.fail(w, &httperr.Error{Status: status, Type: typ, Msg: e.Msg})
		return
	}
	a.fail(w, &httperr.Error{Status: status, Type: typ, Msg: "the action failed", Err: err})
}

func (a *API) fail(w http.ResponseWriter, e *httperr.Error) { httperr.Write(w, e, a.log) }

func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func jsonHandler(f func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, f()) })
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// releaseWork drops held work; the body may say {"upstream_stopped": true}
// when the operator confirmed the upstream stopped it.
func (a *API) releaseWork(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		a.fail(w, &httperr.Error{Status: http.StatusBadRequest, Type: admin.ErrInvalidRequest, Msg: "the work id must be a number"})
		return
	}
	var body struct {
		UpstreamStopped bool `json:"upstream_stopped"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r.Body, &body); err != nil {
			a.fail(w, &httperr.Error{Status: http.StatusBadRequest, Type: admin.ErrInvalidRequest, Msg: `send {"upstream_stopped": true|false} or no body`, Err: err})
			return
		}
	}
	c := caller(r)
	if a.opts.ReleaseWork == nil {
		a.fail(w, &httperr.Error{Status: http.StatusNotImplemented, Type: "not_available", Msg: "held work is not tracked here"})
		return
	}
	if err := a.opts.ReleaseWork(r.Context(), c, id, body.UpstreamStopped); err != nil {
		a.answer(w, admin.Answer{}, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"outcome": "work", "id": id, "released": true, "upstream_stopped": body.UpstreamStopped})
}
