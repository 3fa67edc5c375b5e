package auth

import (
	"net/http"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/config"
)

// Routes as the API and the gates declare them.
var (
	readRoute   = Requirement{Scope: Read}   // GET /status, GET /metrics
	borrowRoute = Requirement{Scope: Borrow} // a gate's borrower routes
	// adminRead is GET /admin/settings and GET /admin/diagnostics: an admin
	// route that trusted loopback may still read.
	adminRead = Requirement{Scope: Admin, Admin: true, LoopbackAllowed: true}
	// pause is POST /admin/lending/disable, the one change loopback may make
	// on Linux and Windows.
	pause = Requirement{Scope: Admin, Admin: true, LoopbackAllowed: true}
	// adminChange is resume, resource switches, work release, settings save
	// and debug enable/disable.
	adminChange = Requirement{Scope: Admin, Admin: true}
)

type matrixRow struct {
	name string
	auth config.Auth
	goos string // "" is linux
	req  Requirement
	from caller
	rq   request

	status int
	// outcome is the one counter label that must rise by exactly one; for
	// refusals it is also the JSON error type.
	outcome Outcome
	// invalidToken: the 401's WWW-Authenticate carries error="invalid_token".
	invalidToken bool
	// principal is the handler's echo of an admitted caller.
	principal string
}

// TestMatrix walks one row per authentication rule, over real TCP
// connections (IPv4 and IPv6 loopback, and this machine's own non-loopback
// address for remote rows where it has one), asserting the status, the
// WWW-Authenticate header, the JSON error type and required scope, and that
// exactly one decision was counted, under the right labels.
//
// Rules from the seed's authentication page and SPEC section 3, and the rows
// that protect them (row names start with the rule tag):
//
//	scopes       read, borrow and admin; none implies another
//	loopback     direct loopback clients may read /status, /metrics and, with
//	             the intent header, GET /admin/settings and diagnostics, and
//	             borrow, without a token (IPv4, IPv6, IPv4-mapped peers)
//	platform     Linux and Windows: loopback may pause and nothing else;
//	             resume, settings, resources, work, debug get 403
//	             administrator_required; macOS: every admin action
//	loopback-token  a token on loopback is honoured when it carries the scope
//	forwarded    Forwarded, X-Forwarded-For/-Host/-Proto, X-Real-IP, Via make
//	             a loopback request need a token
//	host         Host must be a loopback address or localhost with the port
//	             the request arrived on (absent, empty, [::1] vs 127.0.0.1
//	             fine; other names, ports, no port: not direct) - DNS rebinding
//	browser      Sec-Fetch-Site: cross-site and a non-local Origin (incl.
//	             null) make a loopback request need a token; local origins are
//	             http/https on loopback or localhost and the Tauri origins
//	no-token-403 with no token configured a not-direct loopback request is
//	             refused outright with 403
//	trust-off    trust_loopback = false: loopback needs a token like remote
//	remote       remote listeners require credentials: 401 missing, 401
//	             invalid_token, Bearer (any scheme case) and X-Api-Key accepted,
//	             403 for a token without the scope, 403 with no token at all
//	anon         allow_unauthenticated_remote: anonymous read and borrow,
//	             anonymous admin still forbidden
//	closed       one token configured flips every remote request to closed
//	intent       X-Vacancyd-Admin: 1 on every admin route, loopback, remote
//	             and with an admin token; OPTIONS is not exempt
//	origin       admin requests with any Origin refused (browser_origin),
//	             including a cross-site form POST and a local origin
//	sources      allowed_sources: outside gets 403 source_not_allowed before
//	             any credential is examined; loopback is not subject to it
//	oversize     a credential over 512 bytes is refused (401 invalid)
//	unknown-ignored  an unknown credential is ignored where none is needed
//	                 and refused (401) where one is
//	answers      401 carries WWW-Authenticate: Bearer realm="vacancyd"
//	             (+ error="invalid_token" for an unknown credential); 403 and
//	             401 carry a JSON body naming the required scope only; no
//	             answer carries a CORS header (checked on every row)
func TestMatrix(t *testing.T) {
	long := strings.Repeat("a", 513)
	rows := []matrixRow{
		// scopes
		{name: "scopes/borrow token cannot read", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(borrowerValue)}}, status: 403, outcome: OutcomeForbidden},
		{name: "scopes/read token cannot borrow", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 403, outcome: OutcomeForbidden},
		{name: "scopes/admin does not imply read", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(adminOnlyVal)}}, status: 403, outcome: OutcomeForbidden},
		{name: "scopes/admin does not imply borrow", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(operatorValue)}}, status: 403, outcome: OutcomeForbidden},
		{name: "scopes/read token cannot administer", auth: withTokens(), req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{bearer(readerValue), intent}}, status: 403, outcome: OutcomeForbidden},
		{name: "scopes/admin token administers", auth: withTokens(), req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{bearer(adminOnlyVal), intent}}, status: 200, outcome: OutcomeAllowed, principal: "token:adminonly"},

		// loopback
		{name: "loopback/read status without token v4", auth: noTokens(), req: readRoute, from: fromV4,
			status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback/read status without token v6", auth: withTokens(), req: readRoute, from: fromV6,
			status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback/read status from ipv4-mapped peer", auth: withTokens(), req: readRoute, from: fromMapped,
			status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback/borrow without token", auth: withTokens(), req: borrowRoute, from: fromV4,
			rq: request{method: "POST"}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback/get admin settings with intent", auth: noTokens(), req: adminRead, from: fromV4,
			rq: request{header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback/get admin settings without intent", auth: noTokens(), req: adminRead, from: fromV4,
			status: 403, outcome: OutcomeMissingIntent},

		// platform
		{name: "platform/linux loopback may pause", auth: noTokens(), goos: "linux", req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "platform/linux loopback may pause v6", auth: noTokens(), goos: "linux", req: pause, from: fromV6,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "platform/linux loopback may not resume", auth: noTokens(), goos: "linux", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 403, outcome: OutcomeAdministratorRequired},
		{name: "platform/linux loopback may not resume even with tokens configured", auth: withTokens(), goos: "linux", req: adminChange, from: fromV6,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 403, outcome: OutcomeAdministratorRequired},
		{name: "platform/windows loopback may pause", auth: noTokens(), goos: "windows", req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "platform/windows loopback may not save settings", auth: noTokens(), goos: "windows", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 403, outcome: OutcomeAdministratorRequired},
		{name: "platform/darwin loopback may resume", auth: noTokens(), goos: "darwin", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "platform/darwin loopback may pause", auth: noTokens(), goos: "darwin", req: pause, from: fromV6,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "platform/darwin still needs intent", auth: noTokens(), goos: "darwin", req: adminChange, from: fromV4,
			rq: request{method: "POST"}, status: 403, outcome: OutcomeMissingIntent},
		{name: "platform/darwin not-direct loopback gets no admin", auth: noTokens(), goos: "darwin", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent, {"X-Forwarded-For", "192.0.2.7"}}}, status: 403, outcome: OutcomeNotDirect},
		{name: "platform/remote never gets loopback admin on darwin", auth: withTokens(), goos: "darwin", req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 401, outcome: OutcomeMissing},

		// loopback-token
		{name: "loopback-token/admin token resumes on linux", auth: withTokens(), goos: "linux", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{bearer(operatorValue), intent}}, status: 200, outcome: OutcomeAllowed, principal: "token:operator"},
		{name: "loopback-token/admin token resumes on windows v6", auth: withTokens(), goos: "windows", req: adminChange, from: fromV6,
			rq: request{method: "POST", header: [][2]string{apiKey(operatorValue), intent}}, status: 200, outcome: OutcomeAllowed, principal: "token:operator"},
		{name: "loopback-token/token without scope falls back to loopback read", auth: withTokens(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{bearer(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "loopback-token/token without admin on resume is forbidden", auth: withTokens(), goos: "linux", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{bearer(readerValue), intent}}, status: 403, outcome: OutcomeForbidden},
		{name: "loopback-token/token honoured on not-direct loopback", auth: withTokens(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{bearer(readerValue), {"Via", "1.1 proxy"}}}, status: 200, outcome: OutcomeAllowed, principal: "token:reader"},
	}
	rows = append(rows, forwardedRows()...)
	rows = append(rows, hostRows()...)
	rows = append(rows, browserRows()...)
	rows = append(rows, []matrixRow{
		// trust-off
		{name: "trust-off/loopback needs a token", auth: trustOff(), req: readRoute, from: fromV4,
			status: 401, outcome: OutcomeMissing},
		{name: "trust-off/loopback pause needs a token", auth: trustOff(), req: pause, from: fromV6,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 401, outcome: OutcomeMissing},
		{name: "trust-off/loopback with token", auth: trustOff(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:reader"},
		{name: "trust-off/darwin loopback gets no admin", auth: trustOff(), goos: "darwin", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 401, outcome: OutcomeMissing},

		// remote
		{name: "remote/no credential", auth: withTokens(), req: readRoute, from: fromRemote,
			status: 401, outcome: OutcomeMissing},
		{name: "remote/unknown bearer", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(unknownValue)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "remote/unknown x-api-key", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{apiKey(unknownValue)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "remote/bearer accepted", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:reader"},
		{name: "remote/bearer scheme is case-insensitive", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{{"Authorization", "bEARER " + borrowerValue}}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},
		{name: "remote/x-api-key accepted", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{apiKey(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},
		{name: "remote/other auth scheme is invalid", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{{"Authorization", "Basic cmVhZGVyOnNlY3JldA=="}}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "remote/x-api-key is judged when both headers are sent", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue), apiKey(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},
		{name: "remote/an upstream's own authorization beside x-api-key", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{{"Authorization", "Basic dXNlcjpwYXNz"}, apiKey(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},
		{name: "remote/x-api-key unknown beside a valid bearer", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue), apiKey(unknownValue)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "remote/wrong scope is 403", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 403, outcome: OutcomeForbidden},
		{name: "remote/no token configured refuses", auth: noTokens(), req: readRoute, from: fromRemote,
			status: 403, outcome: OutcomeForbidden},
		{name: "remote/no token configured refuses any credential", auth: noTokens(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(unknownValue)}}, status: 403, outcome: OutcomeForbidden},

		// anon
		{name: "anon/read without token", auth: anon(), req: readRoute, from: fromRemote,
			status: 200, outcome: OutcomeAllowed, principal: "anonymous"},
		{name: "anon/borrow without token", auth: anon(), req: borrowRoute, from: fromRemote,
			rq: request{method: "POST"}, status: 200, outcome: OutcomeAllowed, principal: "anonymous"},
		{name: "anon/admin still forbidden", auth: anon(), req: pause, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 403, outcome: OutcomeForbidden},
		{name: "anon/admin read still forbidden", auth: anon(), req: adminRead, from: fromRemote,
			rq: request{header: [][2]string{intent}}, status: 403, outcome: OutcomeForbidden},
		{name: "anon/admin still forbidden on darwin", auth: anon(), goos: "darwin", req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{intent}}, status: 403, outcome: OutcomeForbidden},
		{name: "anon/not-direct loopback still refused", auth: anon(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{{"Origin", "https://evil.example"}}}, status: 403, outcome: OutcomeNotDirect},

		// closed
		{name: "closed/one token flips allow_unauthenticated_remote off", auth: anonPlusToken(), req: readRoute, from: fromRemote,
			status: 401, outcome: OutcomeMissing},
		{name: "closed/one token: borrow needs it", auth: anonPlusToken(), req: borrowRoute, from: fromRemote,
			status: 401, outcome: OutcomeMissing},
		{name: "closed/one token: it works", auth: anonPlusToken(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},

		// intent
		{name: "intent/loopback pause without header", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "POST"}, status: 403, outcome: OutcomeMissingIntent},
		{name: "intent/remote admin token without header", auth: withTokens(), req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{bearer(operatorValue)}}, status: 403, outcome: OutcomeMissingIntent},
		{name: "intent/value must be 1", auth: withTokens(), req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{{"X-Vacancyd-Admin", "true"}}}, status: 403, outcome: OutcomeMissingIntent},
		{name: "intent/OPTIONS is not exempt on admin routes", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "OPTIONS", header: [][2]string{{"Access-Control-Request-Method", "POST"}, {"Access-Control-Request-Headers", "x-vacancyd-admin"}}}, status: 403, outcome: OutcomeMissingIntent},
		{name: "intent/OPTIONS preflight from a page is refused", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "OPTIONS", header: [][2]string{{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "intent/OPTIONS is not exempt remotely", auth: withTokens(), req: borrowRoute, from: fromRemote,
			rq: request{method: "OPTIONS"}, status: 401, outcome: OutcomeMissing},

		// origin
		{name: "origin/cross-site form post to pause", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{{"Origin", "https://evil.example"}, {"Content-Type", "application/x-www-form-urlencoded"}, {"Sec-Fetch-Site", "cross-site"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "origin/local origin still refused on admin", auth: noTokens(), goos: "darwin", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent, {"Origin", "http://127.0.0.1:3000"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "origin/tauri origin still refused on admin", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent, {"Origin", "tauri://localhost"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "origin/null origin refused on admin", auth: noTokens(), req: pause, from: fromV6,
			rq: request{method: "POST", header: [][2]string{intent, {"Origin", "null"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "origin/admin token with origin refused", auth: withTokens(), req: adminChange, from: fromRemote,
			rq: request{method: "POST", header: [][2]string{bearer(operatorValue), intent, {"Origin", "https://console.example"}}}, status: 403, outcome: OutcomeBrowserOrigin},
		{name: "origin/empty origin header refused on admin", auth: withTokens(), req: adminRead, from: fromV4,
			rq: request{header: [][2]string{intent, {"Origin", ""}}}, status: 403, outcome: OutcomeBrowserOrigin},

		// sources
		{name: "sources/outside with right token", auth: withSources(withTokens(), "203.0.113.0/24"), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 403, outcome: OutcomeSourceNotAllowed},
		{name: "sources/outside before intent check", auth: withSources(withTokens(), "203.0.113.0/24"), req: adminChange, from: fromRemote,
			rq: request{method: "POST"}, status: 403, outcome: OutcomeSourceNotAllowed},
		{name: "sources/outside in anonymous mode", auth: withSources(anon(), "203.0.113.0/24"), req: readRoute, from: fromRemote,
			status: 403, outcome: OutcomeSourceNotAllowed},
		{name: "sources/inside with right token", auth: withSources(withTokens(), "203.0.113.0/24", "{peer}"), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:reader"},
		{name: "sources/inside without token", auth: withSources(withTokens(), "{peer}"), req: readRoute, from: fromRemote,
			status: 401, outcome: OutcomeMissing},
		{name: "sources/loopback not subject", auth: withSources(noTokens(), "203.0.113.0/24"), req: readRoute, from: fromV4,
			status: 200, outcome: OutcomeAllowed, principal: "loopback"},

		// oversize
		{name: "oversize/remote 513-byte bearer", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(long)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "oversize/remote 513-byte x-api-key", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{apiKey(long)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "oversize/valid token beside an oversize one", auth: withTokens(), req: readRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(readerValue), apiKey(long)}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},

		// unknown-ignored
		{name: "unknown-ignored/loopback read with unknown key", auth: withTokens(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{bearer(unknownValue)}}, status: 200, outcome: OutcomeAllowed, principal: "loopback"},
		{name: "unknown-ignored/loopback resume with unknown key is 401", auth: withTokens(), goos: "linux", req: adminChange, from: fromV4,
			rq: request{method: "POST", header: [][2]string{bearer(unknownValue), intent}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
		{name: "unknown-ignored/anonymous borrow with unknown key", auth: anon(), req: borrowRoute, from: fromRemote,
			rq: request{header: [][2]string{bearer(unknownValue)}}, status: 200, outcome: OutcomeAllowed, principal: "anonymous"},
		{name: "unknown-ignored/not-direct loopback with unknown key is 401", auth: withTokens(), req: readRoute, from: fromV4,
			rq: request{header: [][2]string{bearer(unknownValue), {"X-Real-IP", "192.0.2.9"}}}, status: 401, outcome: OutcomeInvalid, invalidToken: true},
	}...)

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) { runRow(t, r) })
	}
}

func runRow(t *testing.T, r matrixRow) {
	goos := r.goos
	if goos == "" {
		goos = "linux"
	}
	cfg := r.auth
	for i, s := range cfg.AllowedSources {
		cfg.AllowedSources[i] = strings.ReplaceAll(s, "{peer}", remoteAddr().String())
	}
	a, logs, _ := newTestAuth(t, cfg, goos)
	before := decisions(t, a)
	ans := send(t, a.Require(r.req, echoPrincipal), r.from, r.rq)
	after := decisions(t, a)

	if ans.status != r.status {
		t.Fatalf("status %d, want %d; body %s", ans.status, r.status, ans.body)
	}
	for key, v := range after {
		want := before[key]
		if key == [2]string{r.req.Scope.String(), string(r.outcome)} {
			want++
		}
		if v != want {
			t.Errorf("%s{scope=%q,outcome=%q} = %v, want %v", MetricName, key[0], key[1], v, want)
		}
	}
	www := ans.header.Get("WWW-Authenticate")
	switch {
	case r.status == 401 && r.invalidToken:
		if www != `Bearer realm="vacancyd", error="invalid_token"` {
			t.Errorf("WWW-Authenticate %q, want the invalid_token form", www)
		}
	case r.status == 401:
		if www != `Bearer realm="vacancyd"` {
			t.Errorf("WWW-Authenticate %q, want Bearer realm=\"vacancyd\"", www)
		}
	default:
		if www != "" {
			t.Errorf("WWW-Authenticate %q on a %d", www, r.status)
		}
	}
	for key := range ans.header {
		if strings.HasPrefix(strings.ToLower(key), "access-control-") {
			t.Errorf("answer carries CORS header %s", key)
		}
	}
	if r.status == http.StatusOK {
		if ans.principal != r.principal {
			t.Errorf("principal %q, want %q", ans.principal, r.principal)
		}
	} else {
		b := ans.errBody(t)
		if b.Error.Type != string(r.outcome) {
			t.Errorf("error type %q, want %q", b.Error.Type, r.outcome)
		}
		if b.Error.RequiredScope != r.req.Scope.String() {
			t.Errorf("required_scope %q, want %q", b.Error.RequiredScope, r.req.Scope)
		}
		if ct := ans.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		for _, name := range []string{"reader", "borrower", "operator", "adminonly"} {
			if strings.Contains(string(ans.body), name) {
				t.Errorf("refusal names token %q: %s", name, ans.body)
			}
		}
	}
	for _, s := range allTestSecrets {
		if strings.Contains(logs.String(), s) || strings.Contains(string(ans.body), s) {
			t.Errorf("a secret reached the log or the answer")
		}
	}
	if r.status != http.StatusOK && !strings.Contains(logs.String(), "credential_fp=") {
		t.Errorf("refusal log lacks credential_fp: %s", logs.String())
	}
}

func trustOff() config.Auth {
	c := withTokens()
	c.TrustLoopback = false
	return c
}

func anon() config.Auth {
	return config.Auth{TrustLoopback: true, AllowUnauthenticatedRemote: true}
}

func anonPlusToken() config.Auth {
	return config.Auth{TrustLoopback: true, AllowUnauthenticatedRemote: true, Tokens: []config.Token{tok("borrower", borrowerValue, "borrow")}}
}

func withSources(c config.Auth, sources ...string) config.Auth {
	c.AllowedSources = append([]string(nil), sources...)
	return c
}

// forwardedRows: each forwarding header, with and without tokens configured.
func forwardedRows() []matrixRow {
	var rows []matrixRow
	for _, h := range [][2]string{
		{"Forwarded", "for=192.0.2.60;proto=http"},
		{"X-Forwarded-For", "192.0.2.60"},
		{"X-Forwarded-Host", "vacancyd.example"},
		{"X-Forwarded-Proto", "https"},
		{"X-Real-IP", "192.0.2.60"},
		{"Via", "1.1 tunnel"},
		{"x-forwarded-for", ""},
	} {
		rows = append(rows,
			matrixRow{name: "forwarded/" + h[0] + " with tokens needs one", auth: withTokens(), req: readRoute, from: fromV4,
				rq: request{header: [][2]string{h}}, status: 401, outcome: OutcomeNotDirect},
			matrixRow{name: "no-token-403/" + h[0] + " without tokens", auth: noTokens(), req: borrowRoute, from: fromV6,
				rq: request{header: [][2]string{h}}, status: 403, outcome: OutcomeNotDirect},
		)
	}
	return append(rows,
		matrixRow{name: "forwarded/with a token is admitted", auth: withTokens(), req: borrowRoute, from: fromV4,
			rq: request{header: [][2]string{{"X-Forwarded-For", "192.0.2.60"}, apiKey(borrowerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:borrower"},
		matrixRow{name: "forwarded/pause over a proxy is not loopback's", auth: noTokens(), req: pause, from: fromV4,
			rq: request{method: "POST", header: [][2]string{intent, {"Forwarded", "for=192.0.2.60"}}}, status: 403, outcome: OutcomeNotDirect},
	)
}

// hostRows: the Host rule, which stops DNS rebinding.
func hostRows() []matrixRow {
	ok := func(name string, from caller, rq request) matrixRow {
		return matrixRow{name: "host/" + name, auth: noTokens(), req: readRoute, from: from, rq: rq, status: 200, outcome: OutcomeAllowed, principal: "loopback"}
	}
	bad := func(name string, from caller, rq request) matrixRow {
		return matrixRow{name: "host/" + name, auth: noTokens(), req: readRoute, from: from, rq: rq, status: 403, outcome: OutcomeNotDirect}
	}
	badTok := func(name string, from caller, rq request) matrixRow {
		return matrixRow{name: "host/" + name, auth: withTokens(), req: readRoute, from: from, rq: rq, status: 401, outcome: OutcomeNotDirect}
	}
	return []matrixRow{
		ok("127.0.0.1 with port", fromV4, request{host: "127.0.0.1:{port}"}),
		ok("localhost with port", fromV4, request{host: "localhost:{port}"}),
		ok("LocalHost any case", fromV6, request{host: "LocalHost:{port}"}),
		ok("[::1] on an IPv4 listener", fromV4, request{host: "[::1]:{port}"}),
		ok("127.0.0.1 on an IPv6 listener", fromV6, request{host: "127.0.0.1:{port}"}),
		ok("other 127/8 literal", fromV4, request{host: "127.8.9.10:{port}"}),
		ok("absent (HTTP/1.0)", fromV4, request{raw: "absent"}),
		ok("empty", fromV4, request{raw: "empty"}),
		ok("empty on IPv6", fromV6, request{raw: "empty"}),
		bad("rebinding name", fromV4, request{host: "rebind.example:{port}"}),
		bad("rebinding name on IPv6", fromV6, request{host: "attacker.example:{port}"}),
		bad("rebinding name on mapped peer", fromMapped, request{host: "rebind.example:{port}"}),
		bad("wrong port", fromV4, request{host: "127.0.0.1:{other}"}),
		bad("localhost wrong port", fromV6, request{host: "localhost:{other}"}),
		bad("no port means 80", fromV4, request{host: "127.0.0.1"}),
		bad("host.docker.internal", fromV4, request{host: "host.docker.internal:{port}"}),
		bad("localhost subdomain", fromV4, request{host: "localhost.evil.example:{port}"}),
		bad("unspecified address", fromV4, request{host: "0.0.0.0:{port}"}),
		badTok("rebinding with tokens configured needs a token", fromV4, request{host: "rebind.example:{port}"}),
		{name: "host/rebinding with a read token is admitted", auth: withTokens(), req: readRoute, from: fromV4,
			rq: request{host: "rebind.example:{port}", header: [][2]string{bearer(readerValue)}}, status: 200, outcome: OutcomeAllowed, principal: "token:reader"},
	}
}

// browserRows: Sec-Fetch-Site and Origin on non-admin routes.
func browserRows() []matrixRow {
	ok := func(name string, from caller, h ...[2]string) matrixRow {
		return matrixRow{name: "browser/" + name, auth: noTokens(), req: readRoute, from: from, rq: request{header: h}, status: 200, outcome: OutcomeAllowed, principal: "loopback"}
	}
	bad := func(name string, from caller, h ...[2]string) matrixRow {
		return matrixRow{name: "browser/" + name, auth: noTokens(), req: borrowRoute, from: from, rq: request{method: "POST", header: h}, status: 403, outcome: OutcomeNotDirect}
	}
	return []matrixRow{
		bad("sec-fetch-site cross-site", fromV4, [2]string{"Sec-Fetch-Site", "cross-site"}),
		bad("sec-fetch-site cross-site any case", fromV6, [2]string{"Sec-Fetch-Site", "Cross-Site"}),
		bad("cross-site even with a local origin", fromV4, [2]string{"Sec-Fetch-Site", "cross-site"}, [2]string{"Origin", "http://localhost:3000"}),
		ok("sec-fetch-site same-origin", fromV4, [2]string{"Sec-Fetch-Site", "same-origin"}),
		ok("sec-fetch-site same-site", fromV4, [2]string{"Sec-Fetch-Site", "same-site"}),
		ok("sec-fetch-site none", fromV4, [2]string{"Sec-Fetch-Site", "none"}),
		bad("foreign origin", fromV4, [2]string{"Origin", "https://evil.example"}),
		bad("origin null", fromV4, [2]string{"Origin", "null"}),
		bad("origin null on IPv6", fromV6, [2]string{"Origin", "null"}),
		bad("origin with a lookalike host", fromV4, [2]string{"Origin", "http://localhost.evil.example"}),
		bad("origin file scheme", fromV4, [2]string{"Origin", "file://"}),
		bad("origin tauri with another host", fromV4, [2]string{"Origin", "tauri://evil.example"}),
		bad("origin empty", fromV4, [2]string{"Origin", ""}),
		ok("origin http on 127.0.0.1 other port", fromV4, [2]string{"Origin", "http://127.0.0.1:5173"}),
		ok("origin http localhost", fromV4, [2]string{"Origin", "http://localhost"}),
		ok("origin https localhost any port", fromV6, [2]string{"Origin", "https://localhost:8443"}),
		ok("origin http [::1]", fromV6, [2]string{"Origin", "http://[::1]:3000"}),
		ok("origin tauri://localhost", fromV4, [2]string{"Origin", "tauri://localhost"}),
		ok("origin http://tauri.localhost", fromV4, [2]string{"Origin", "http://tauri.localhost"}),
		{name: "browser/cross-site page with tokens configured needs a token", auth: withTokens(), req: borrowRoute, from: fromV4,
			rq: request{method: "POST", header: [][2]string{{"Origin", "https://evil.example"}}}, status: 401, outcome: OutcomeNotDirect},
	}
}
