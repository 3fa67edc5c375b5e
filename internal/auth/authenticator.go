package auth

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/httperr"
)

// AdminIntentHeader must be "1" on every admin route.
const AdminIntentHeader = "X-Vacancyd-Admin"

// realm is the WWW-Authenticate realm of every 401.
const realm = "vacancyd"

// Requirement is what a route needs from its caller.
type Requirement struct {
	// Scope is the scope the caller must hold. The zero value is judged as Admin.
	Scope Scope
	// Admin marks an admin route: it needs X-Vacancyd-Admin: 1 and refuses any
	// request with an Origin header.
	Admin bool
	// LoopbackAllowed lets a trusted direct loopback client perform this admin
	// action on Linux and Windows (only pausing lending is meant to set it). On
	// macOS trusted loopback may perform every admin action.
	LoopbackAllowed bool
}

// Options are the authenticator's surroundings. The zero value works: no
// logging, no metrics registration, the running platform, the real clock.
type Options struct {
	// Logger receives decisions and token-file events; nil discards them.
	Logger *slog.Logger
	// Registerer gets vacancyd_auth_total; nil leaves it unregistered.
	Registerer prometheus.Registerer
	// GOOS selects the loopback admin policy: "darwin" allows trusted loopback
	// every admin action, anything else only LoopbackAllowed ones. Empty means
	// runtime.GOOS.
	GOOS string
	// Now is the clock that paces token-file checks; nil means time.Now.
	Now func() time.Time
}

// Authenticator judges requests against the [auth] configuration. It is safe
// for concurrent use; Update and token rotation swap its view atomically, so a
// request is judged by the old or the new configuration, never a mix.
type Authenticator struct {
	log      *slog.Logger
	counter  *prometheus.CounterVec
	now      func() time.Time
	adminAll bool // trusted loopback may perform every admin action (macOS)

	// hash computes a presented credential's digest; tests count its calls.
	hash func([]byte) digest

	cur atomic.Pointer[state]
	// nextCheck is when token files may next be read (UnixNano).
	nextCheck atomic.Int64
	// refreshMu serialises publishing a new state (rotation and Update) and
	// guards watches.
	refreshMu sync.Mutex
	watches   map[string]*fileWatch
}

// New builds an Authenticator from cfg, whose token secrets config.Load has
// already loaded. A value_file token whose file is unusable starts disabled.
func New(cfg config.Auth, opts Options) (*Authenticator, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "auth")
	goos := opts.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	counter, err := newCounter(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("auth: registering %s: %w", MetricName, err)
	}
	a := &Authenticator{
		log:      log,
		counter:  counter,
		now:      now,
		adminAll: goos == "darwin",
		hash:     sha256.Sum256,
		watches:  map[string]*fileWatch{},
	}
	if err := a.Update(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// Update applies a new [auth] configuration live. On error nothing changes.
// Token files are read again at once.
func (a *Authenticator) Update(cfg config.Auth) error {
	s, err := buildState(cfg, a.log)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	a.watches = map[string]*fileWatch{}
	if next := refresh(s, a.watches, a.log); next != nil {
		s = next
	}
	a.cur.Store(s)
	a.nextCheck.Store(a.now().Add(refreshInterval).UnixNano())
	return nil
}

// Refresh reads the token files now, whatever the time since the last check.
// A file watcher or SIGHUP handler may call it; requests also trigger a check
// at most once a second.
func (a *Authenticator) Refresh() {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	a.refreshLocked(a.now())
}

// maybeRefresh checks the token files when a second has passed since the last
// check and no other request is already doing so.
func (a *Authenticator) maybeRefresh() {
	now := a.now()
	if now.UnixNano() < a.nextCheck.Load() || !a.refreshMu.TryLock() {
		return
	}
	defer a.refreshMu.Unlock()
	if now.UnixNano() < a.nextCheck.Load() {
		return // another request checked meanwhile
	}
	a.refreshLocked(now)
}

// refreshLocked re-reads the token files; the next check is paced from
// started, the time before the files were read, so a file written during the
// read is seen on the next check.
func (a *Authenticator) refreshLocked(started time.Time) {
	if next := refresh(a.cur.Load(), a.watches, a.log); next != nil {
		a.cur.Store(next)
	}
	a.nextCheck.Store(started.Add(refreshInterval).UnixNano())
}

// Require wraps next so that it runs only for requests Authorize admits, with
// the Principal in the request context; others get the JSON error answer.
func (a *Authenticator) Require(req Requirement, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, herr := a.Authorize(r, req)
		if herr != nil {
			httperr.Write(w, herr, nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// presented is the credential a request offers, already judged.
type presented struct {
	status CredentialStatus
	// fp is the logged fingerprint: 8 hex digits, "none", "malformed" or
	// "too_long".
	fp string
	// token is the index of the matching active token, or -1.
	token int
}

// Authorize judges r against req in the order the package documentation
// gives. It returns the admitted Principal, or the error to answer with. Every
// call counts exactly one decision.
func (a *Authenticator) Authorize(r *http.Request, req Requirement) (Principal, *httperr.Error) {
	if !req.Scope.valid() {
		req.Scope = Admin
	}
	d := decision{a: a, r: r, req: req, cred: presented{fp: "none", token: -1}}
	d.peer, _ = netip.ParseAddrPort(r.RemoteAddr)
	p, herr := d.judge()
	if herr != nil {
		return Principal{}, herr
	}
	return p, nil
}

// decision carries one Authorize call.
type decision struct {
	a    *Authenticator
	r    *http.Request
	req  Requirement
	s    *state
	peer netip.AddrPort
	cred presented
}

func (d *decision) judge() (Principal, *httperr.Error) {
	d.a.maybeRefresh()
	d.s = d.a.cur.Load()
	loopback := IsLoopbackPeer(d.peer.Addr())

	if !loopback && !d.s.sourceAllowed(d.peer.Addr()) {
		return d.refuse(OutcomeSourceNotAllowed, "", "the caller's address is not in auth.allowed_sources")
	}
	// The credential is examined before the admin checks so that their
	// refusals log its fingerprint too.
	d.examineCredential()
	if d.req.Admin {
		if hasHeader(d.r.Header, "Origin") {
			return d.refuse(OutcomeBrowserOrigin, "", "admin requests from a web page (with an Origin header) are refused")
		}
		if d.r.Header.Get(AdminIntentHeader) != "1" {
			return d.refuse(OutcomeMissingIntent, "", "admin requests need the header "+AdminIntentHeader+": 1")
		}
	}

	if d.cred.token >= 0 && d.s.tokens[d.cred.token].scopes.has(d.req.Scope) {
		return d.allow(ViaToken)
	}

	if loopback && d.s.trustLoopback {
		reason := Disqualifier(d.r.Header, d.r.Host, localPort(d.r))
		if reason == "" {
			return d.judgeDirectLoopback()
		}
		return d.judgeIndirectLoopback(reason)
	}
	return d.judgeRemote()
}

// judgeDirectLoopback decides a direct loopback request that no token admitted.
func (d *decision) judgeDirectLoopback() (Principal, *httperr.Error) {
	if d.req.Scope != Admin || d.a.adminAll || d.req.LoopbackAllowed {
		return d.allow(ViaLoopback)
	}
	switch {
	case d.cred.token >= 0:
		return d.refuse(OutcomeForbidden, "", "this token lacks the "+d.req.Scope.String()+" scope")
	case d.cred.status != CredentialNone:
		return d.refuse(OutcomeInvalid, "", "the presented credential is not valid")
	}
	return d.refuse(OutcomeAdministratorRequired, "", "over loopback this action needs an administrator: present an admin token, or use vacancyd admin-request as an administrator")
}

// judgeIndirectLoopback decides a loopback request that is not direct: it
// needs a token, like a remote one.
func (d *decision) judgeIndirectLoopback(reason string) (Principal, *httperr.Error) {
	switch {
	case len(d.s.tokens) == 0:
		return d.refuseReason(OutcomeNotDirect, reason, "this loopback request was forwarded or sent by a web page, and no token is configured that could authorise it")
	case d.cred.token >= 0:
		return d.refuse(OutcomeForbidden, reason, "this token lacks the "+d.req.Scope.String()+" scope")
	case d.cred.status != CredentialNone:
		return d.refuse(OutcomeInvalid, reason, "the presented credential is not valid")
	}
	return d.refuseReason(OutcomeNotDirect, reason, "this loopback request was forwarded or sent by a web page, so it needs a token")
}

// judgeRemote decides a request from outside loopback (or from loopback with
// trust_loopback off) that no token admitted.
func (d *decision) judgeRemote() (Principal, *httperr.Error) {
	if len(d.s.tokens) == 0 {
		if d.s.allowAnon && d.req.Scope != Admin && !d.req.Admin {
			return d.allow(ViaAnonymous)
		}
		return d.refuse(OutcomeForbidden, "", "this request needs the "+d.req.Scope.String()+" scope, and no token is configured that could grant it")
	}
	switch {
	case d.cred.token >= 0:
		return d.refuse(OutcomeForbidden, "", "this token lacks the "+d.req.Scope.String()+" scope")
	case d.cred.status != CredentialNone:
		return d.refuse(OutcomeInvalid, "", "the presented credential is not valid")
	}
	return d.refuse(OutcomeMissing, "", "this request needs a token with the "+d.req.Scope.String()+" scope")
}

// examineCredential parses, hashes and matches the presented credential. A
// credential over MaxCredentialLength bytes is not hashed.
func (d *decision) examineCredential() {
	v, st := ParseCredential(d.r.Header)
	d.cred.status = st
	switch st {
	case CredentialNone:
		return
	case CredentialOK:
	default:
		d.cred.fp = st.String()
		return
	}
	dg := d.a.hash([]byte(v))
	d.cred.fp = fingerprint(dg)
	d.cred.token = d.s.match(dg)
}

func (d *decision) allow(via Via) (Principal, *httperr.Error) {
	p := Principal{Via: via, Peer: d.peer}
	switch via {
	case ViaToken:
		t := d.s.tokens[d.cred.token]
		p.Token, p.Scopes = t.name, t.scopes.list()
	case ViaLoopback:
		p.Scopes = []Scope{Read, Borrow}
		if d.a.adminAll {
			p.Scopes = append(p.Scopes, Admin)
		}
	case ViaAnonymous:
		p.Scopes = []Scope{Read, Borrow}
	}
	d.count(OutcomeAllowed)
	d.a.log.Debug("request admitted", "peer", d.peer.String(), "principal", p.String(), "scope", d.req.Scope.String(), "method", d.r.Method, "path", d.r.URL.Path)
	return p, nil
}

// refuse answers 401 for missing, invalid and (with tokens configured)
// not_direct outcomes, and 403 for the rest. reason is why a loopback request
// was not direct, for the log only.
func (d *decision) refuse(o Outcome, reason, msg string) (Principal, *httperr.Error) {
	status := http.StatusForbidden
	var h http.Header
	switch o {
	case OutcomeMissing, OutcomeNotDirect:
		status = http.StatusUnauthorized
		h = http.Header{"Www-Authenticate": {`Bearer realm="` + realm + `"`}}
	case OutcomeInvalid:
		status = http.StatusUnauthorized
		h = http.Header{"Www-Authenticate": {`Bearer realm="` + realm + `", error="invalid_token"`}}
	}
	d.count(o)
	args := []any{"peer", d.peer.String(), "outcome", string(o), "scope", d.req.Scope.String(), "method", d.r.Method, "path", d.r.URL.Path, "credential_fp", d.cred.fp}
	if reason != "" {
		args = append(args, "not_direct_because", reason)
	}
	d.a.log.Info("request refused", args...)
	return Principal{}, &httperr.Error{Status: status, Type: string(o), Msg: msg, Scope: d.req.Scope.String(), Header: h}
}

// refuseReason is refuse for not_direct, which is 403 when no token is
// configured (nothing could authorise the request) and 401 otherwise.
func (d *decision) refuseReason(o Outcome, reason, msg string) (Principal, *httperr.Error) {
	p, herr := d.refuse(o, reason, msg)
	if len(d.s.tokens) == 0 {
		herr.Status, herr.Header = http.StatusForbidden, nil
	}
	return p, herr
}

func (d *decision) count(o Outcome) {
	d.a.counter.WithLabelValues(d.req.Scope.String(), string(o)).Inc()
}

// localPort is the port the request arrived on, 0 when the server did not
// record it.
func localPort(r *http.Request) uint16 {
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return 0
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		return uint16(ta.Port)
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return 0
	}
	return ap.Port()
}

// hasHeader reports whether h holds name in any letter case, with any value.
func hasHeader(h http.Header, name string) bool {
	for key := range h {
		if strings.EqualFold(key, name) {
			return true
		}
	}
	return false
}
