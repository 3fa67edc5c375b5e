// Package gate is the listener in front of one upstream. A borrower request
// walks: declared-size check -> authentication (scope borrow) -> body read
// under the limits -> the adapter's route table -> lending admission ->
// httputil.ReverseProxy. The body is read only after authentication, so an
// anonymous client can hold none of the global body budget. Nothing refused
// reaches the upstream.
package gate

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/auth"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// Options build a Gate.
type Options struct {
	Upstream config.Upstream
	Limits   config.Limits
	Auth     *auth.Authenticator
	Adapter  adapter.Adapter
	Admitter lending.Admitter
	Budget   *Budget
	Metrics  *Metrics
	// RetryAfter is the Retry-After hint on 503 while not lending.
	RetryAfter time.Duration
	// Transport reaches the upstream; nil means a new http.Transport.
	Transport http.RoundTripper
	Log       *slog.Logger
}

// Gate serves one upstream's listener.
type Gate struct {
	id      string
	pol     atomic.Pointer[policy]
	auth    *auth.Authenticator
	admit   lending.Admitter
	budget  *Budget
	metrics *Metrics
	series  *gateSeries
	proxy   *httputil.ReverseProxy
	owners  *owners // ComfyUI gates only
	log     *slog.Logger
}

// policy is what a settings change may replace while the gate runs. Each
// request uses the policy it started with.
type policy struct {
	up         config.Upstream
	target     *url.URL
	limits     config.Limits
	adapter    adapter.Adapter
	retryAfter string
	credential string // the Authorization value vacancyd presents upstream
}

func newPolicy(o Options) (*policy, error) {
	target, err := url.Parse(o.Upstream.Target)
	if err != nil {
		return nil, fmt.Errorf("gate %s: target: %w", o.Upstream.ID, err)
	}
	p := &policy{
		up:         o.Upstream,
		target:     target,
		limits:     o.Limits,
		adapter:    o.Adapter,
		retryAfter: strconv.Itoa(max(1, int(o.RetryAfter.Round(time.Second)/time.Second))),
	}
	if c := o.Upstream.Credential; c != nil {
		switch c.Scheme {
		case "bearer":
			p.credential = "Bearer " + c.Secret.Reveal()
		case "basic":
			p.credential = "Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Secret.Reveal()))
		}
	}
	return p, nil
}

// New builds a gate. The upstream must have passed config validation.
func New(o Options) (*Gate, error) {
	p, err := newPolicy(o)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	g := &Gate{
		id:      o.Upstream.ID,
		auth:    o.Auth,
		admit:   o.Admitter,
		budget:  o.Budget,
		metrics: o.Metrics,
		log:     o.Log.With("component", "gate", "upstream", o.Upstream.ID),
	}
	g.pol.Store(p)
	tr := o.Transport
	if tr == nil {
		tr = NewTransport()
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // stream every write at once: NDJSON, SSE, chunked audio
		ErrorHandler:   g.proxyError,
		ModifyResponse: g.modifyResponse,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	if o.Adapter.Kind() == config.KindComfyUI {
		g.owners = newOwners()
	}
	g.series = g.metrics.forUpstream(g.id)
	return g, nil
}

// Update replaces the gate's policy (target, credential, management,
// keep_alive cap, body limits, Retry-After) for requests that start from now.
// The upstream id and kind must not change; the listener is not touched.
func (g *Gate) Update(o Options) error {
	if o.Upstream.ID != g.id || o.Adapter.Kind() != g.pol.Load().adapter.Kind() {
		return fmt.Errorf("gate %s: id and kind cannot change while running", g.id)
	}
	p, err := newPolicy(o)
	if err != nil {
		return err
	}
	g.pol.Store(p)
	return nil
}

// NewTransport returns the transport gates use to reach upstreams: no
// compression negotiation of its own (bodies pass through as the upstream
// sends them) and a generous idle pool for the local hop.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.MaxIdleConnsPerHost = 64
	t.Proxy = nil // the upstream is local; never route it through an HTTP proxy
	return t
}

// borrowerName names a borrower in the work list: its token, or how an
// anonymous one came in.
func borrowerName(p auth.Principal) string {
	if p.Via == auth.ViaToken {
		return p.Token
	}
	return p.String()
}

// reclaimed reports whether a reclaim cancelled the work.
func reclaimed(w *lending.Work) bool {
	st := w.CurrentState()
	return st == lending.WorkCancelling || st == lending.WorkHeld
}

// ctxKey carries per-request gate state to the proxy hooks.
type ctxKey struct{}

type reqState struct {
	work     *lending.Work // the admitted work, for inference
	job      bool          // the response started a job that outlives it
	pol      *policy
	class    adapter.Class
	outcome  string
	record   int    // what ownership records from the response
	borrower string // the borrower, for ownership
}

// ServeHTTP implements http.Handler.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	p := g.pol.Load()
	// A declared body larger than the cap is refused before anything else.
	if r.ContentLength > p.limits.MaxBodyBytes {
		g.refuse(w, r, p, refuseTooLarge(p.limits.MaxBodyBytes))
		return
	}
	principal, aerr := g.auth.Authorize(r, auth.Requirement{Scope: auth.Borrow})
	if aerr != nil {
		g.refuse(w, r, p, &refusal{status: aerr.Status, outcome: OutcomeAuth, errType: aerr.Type, msg: aerr.Msg, scope: aerr.Scope, header: aerr.Header,
			closeConn: r.ContentLength != 0}) // a body (declared or chunked) is left unread
		return
	}
	r = r.WithContext(auth.WithPrincipal(r.Context(), principal))

	body, ref := readBody(w, r, p.limits.MaxBodyBytes, p.limits.BodyTimeout.Duration, g.budget)
	if ref != nil {
		g.refuse(w, r, p, ref)
		return
	}
	defer body.release()

	d := p.adapter.Classify(adapter.NewRequest(r, body.data))
	switch {
	case d.Malformed:
		g.refuse(w, r, p, &refusal{status: http.StatusBadRequest, outcome: OutcomeRequest, errType: "refused_request", msg: "the request could not be understood: " + d.Reason})
		return
	case d.Class == adapter.ClassManagement && !p.up.AllowsManagement():
		g.refuse(w, r, p, &refusal{status: http.StatusForbidden, outcome: OutcomeManagement, errType: "management_denied",
			msg: "this gate lends the GPU for inference; managing the upstream is not allowed (management = \"deny\")"})
		return
	case d.Class == adapter.ClassUnknown || !d.Class.Valid():
		g.refuse(w, r, p, &refusal{status: http.StatusNotFound, outcome: OutcomeRoute, errType: "refused_route", msg: "this gate does not forward " + r.Method + " " + r.URL.Path})
		return
	}

	var work *lending.Work
	if d.Class == adapter.ClassInference {
		ctx, lw, why := g.admit.Acquire(r.Context(), lending.WorkSpec{Upstream: g.id, Resource: p.up.Resource, Borrower: borrowerName(principal), Model: d.Model})
		if lw == nil {
			g.refuse(w, r, p, &refusal{status: http.StatusServiceUnavailable, outcome: OutcomeNotLending, errType: string(why),
				msg: notLendingMessage(why), retryAfter: -1})
			return
		}
		work = lw
		r = r.WithContext(ctx)
	}

	out := body.data
	if d.RewrittenBody != nil {
		out = d.RewrittenBody
	}
	st := &reqState{pol: p, class: d.Class, outcome: OutcomeAdmitted, work: work}
	if g.owners != nil {
		var ref *refusal
		if out, ref = g.owners.prepare(r, d, borrowerKey(principal), out, st); ref != nil {
			if work != nil {
				work.End() // admitted, then refused: nothing runs
			}
			g.refuse(w, r, p, ref)
			return
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
	if len(out) > 0 || r.ContentLength > 0 {
		r.Body = readCloser{bytes.NewReader(out)}
		r.ContentLength = int64(len(out))
		r.Header.Del("Transfer-Encoding")
		r.TransferEncoding = nil
	}
	gauge := g.series.inFlight
	gauge.Inc()
	finished := false
	// Deferred, because the proxy ends a response it cannot finish (a
	// client that stopped reading or went away, an upstream that broke
	// mid-stream) by panicking with http.ErrAbortHandler, which the server
	// recovers; the request must still leave the gauge and be counted. A
	// response relayed to its end is admitted work even if the client
	// hangs up right after (SDKs close a stream at its last event).
	defer func() {
		gauge.Dec()
		if work != nil {
			// A job (a queued ComfyUI prompt) lives on after its request;
			// everything else ends with its response.
			if st.job {
				g.admit.TrackJob(work)
			} else {
				work.End()
			}
			if reclaimed(work) {
				st.outcome = OutcomeReclaimed
				if !finished {
					g.cutStream(w, p)
				}
			}
		}
		if st.outcome == OutcomeAdmitted && !finished {
			st.outcome = OutcomeUpstreamError
			if r.Context().Err() != nil {
				st.outcome = OutcomeClientGone
			}
		}
		g.series.requests[st.outcome].Inc()
		g.series.duration[d.Class].Observe(time.Since(start).Seconds())
		g.log.Debug("forwarded", "method", r.Method, "path", r.URL.Path, "class", d.Class, "borrower", principal.String(), "outcome", st.outcome)
	}()
	g.proxy.ServeHTTP(newIdleWriter(w, p.limits.ResponseIdleTimeout.Duration), r)
	finished = true
}

// cutStream ends a streamed answer that a reclaim cut short with an error
// in the upstream's own streaming format, where it has one, so that the
// borrower's client reports an error instead of a complete answer. The
// connection is then aborted as usual.
func (g *Gate) cutStream(w http.ResponseWriter, p *policy) {
	sc, ok := p.adapter.(adapter.StreamCutter)
	if !ok {
		return
	}
	line := sc.StreamError(w.Header().Get("Content-Type"), "reclaimed", "the GPU's owner took it back; this answer was cut short (reclaimed)")
	if len(line) == 0 {
		return
	}
	_, _ = w.Write(line)
	_ = http.NewResponseController(w).Flush()
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// rewrite prepares the outbound request: Rewrite has already dropped the
// client's hop-by-hop and X-Forwarded-* headers.
func (g *Gate) rewrite(pr *httputil.ProxyRequest) {
	p := pr.In.Context().Value(ctxKey{}).(*reqState).pol
	pr.SetURL(p.target)
	pr.Out.Host = p.target.Host
	if !p.up.ForwardAuthorization {
		auth.StripCredentials(pr.Out.Header)
	}
	if p.credential != "" {
		pr.Out.Header.Set("Authorization", p.credential)
	}
	// The gate already holds the whole body: waiting for the upstream's
	// 100 Continue would only delay it.
	pr.Out.Header.Del("Expect")
	// Browsers' markers mean nothing upstream; Ollama checks Origin itself
	// and would refuse a request that vacancyd already judged.
	pr.Out.Header.Del("Origin")
	pr.Out.Header.Del("Referer")
	pr.Out.Header.Del("Cookie")
}

func (g *Gate) modifyResponse(resp *http.Response) error {
	// No upstream CORS header ever reaches a borrower through the gate.
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			delete(resp.Header, k)
		}
	}
	resp.Header.Del("Set-Cookie")
	if st, ok := resp.Request.Context().Value(ctxKey{}).(*reqState); ok && g.owners != nil {
		return g.owners.observe(resp, st)
	}
	return nil
}

func (g *Gate) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	st := r.Context().Value(ctxKey{}).(*reqState)
	if st.work != nil && reclaimed(st.work) {
		// A reclaim cancelled the request before the upstream answered:
		// the borrower learns why, in the upstream's shape, and may retry.
		w.Header().Set("Retry-After", st.pol.retryAfter)
		g.write(w, st.pol, r.URL.Path, http.StatusServiceUnavailable, string(lending.ReasonReclaiming),
			"the GPU's owner took it back before the answer started; retry later (reclaimed)")
		return
	}
	if r.Context().Err() != nil {
		st.outcome = OutcomeClientGone
		return
	}
	st.outcome = OutcomeUpstreamError
	g.log.Warn("upstream failed", "method", r.Method, "path", r.URL.Path, "target", config.RedactURL(st.pol.up.Target), "err", err)
	g.write(w, st.pol, r.URL.Path, http.StatusBadGateway, "upstream_unavailable", "the upstream server did not answer")
}

func notLendingMessage(why lending.Reason) string {
	return notLendingText(why) + " (" + string(why) + ")"
}

func notLendingText(why lending.Reason) string {
	switch why {
	case lending.ReasonOwnerPresent:
		return "the GPU's owner is using the machine; it is not being lent now"
	case lending.ReasonGPUPressure:
		return "the GPU's owner is using the GPU; it is not being lent now"
	case lending.ReasonLendingPaused:
		return "the owner has paused lending"
	case lending.ReasonResourceDisabled:
		return "this GPU is switched off for lending"
	case lending.ReasonOutsideWindow:
		return "lending is outside its allowed hours"
	case lending.ReasonPresenceUnknown:
		return "the owner's presence is not known yet; lending is held"
	case lending.ReasonReclaiming:
		return "the owner is taking the GPU back"
	}
	return "the GPU is not being lent now"
}

// refusal is an answer the gate gives without reaching the upstream.
type refusal struct {
	status     int
	outcome    string
	errType    string
	msg        string
	scope      string
	header     http.Header
	retryAfter time.Duration // -1 means the gate's configured hint
	// closeConn marks a refusal that leaves (part of) the request body
	// unread: the connection is closed after the answer.
	closeConn bool
}

func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, p *policy, ref *refusal) {
	h := w.Header()
	for k, vs := range ref.header {
		h[k] = vs
	}
	switch {
	case ref.retryAfter < 0:
		h.Set("Retry-After", p.retryAfter)
	case ref.retryAfter > 0:
		h.Set("Retry-After", strconv.Itoa(int(ref.retryAfter/time.Second)))
	}
	if ref.closeConn {
		// The unread rest of a refused body must not be parsed as a request.
		h.Set("Connection", "close")
		// After the handler, the server reads on through what is left of
		// the body (up to 256 KiB) before closing, with no deadline of its
		// own: a client that stalls would hold the connection (and, for an
		// unauthenticated request, the answer) forever. It gets the time a
		// body may take, or none when it has just used that up.
		grace := p.limits.BodyTimeout.Duration
		if ref.outcome == OutcomeBodyTimeout {
			grace = 0
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(grace))
	}
	msg := ref.msg
	if ref.scope != "" {
		msg += " (requires scope " + ref.scope + ")"
	}
	g.series.requests[ref.outcome].Inc()
	g.write(w, p, r.URL.Path, ref.status, ref.errType, msg)
	g.log.Info("request refused", "method", r.Method, "path", r.URL.Path, "peer", r.RemoteAddr, "outcome", ref.outcome, "type", ref.errType)
}

// write answers in the upstream's own error shape, so that the borrower's
// client library reads it as a normal API error.
func (g *Gate) write(w http.ResponseWriter, p *policy, path string, status int, errType, msg string) {
	ct, body := p.adapter.ErrorBody(path, status, errType, msg)
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
