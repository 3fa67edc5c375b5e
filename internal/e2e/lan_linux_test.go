//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/testutil/netns"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// Token names are distinctive so that a test can tell when an answer names
// one: a refusal names the scope it needed and never which tokens exist.
const (
	readName     = "e2e-prom-scraper"
	borrowName   = "e2e-lan-cluster"
	operatorName = "e2e-ops-console"
)

// lanTokens are the three tokens of the LAN tests, one per kind of client.
type lanTokens struct {
	read, borrow, operator string
}

func newLANTokens(t *testing.T) lanTokens {
	return lanTokens{read: newToken(t), borrow: newToken(t), operator: newToken(t)}
}

// files are the secret files holding the tokens, for proc.Start.
func (k lanTokens) files() map[string]string {
	return map[string]string{
		"secrets/read.token":     k.read + "\n",
		"secrets/borrow.token":   k.borrow + "\n",
		"secrets/operator.token": k.operator + "\n",
	}
}

// config is a configuration listening on listen with the three tokens in
// value_file secrets, plus any extra [auth] lines.
func (k lanTokens) config(listen string, authExtra ...string) string {
	return fmt.Sprintf(`[server]
listen = %q

[auth]
trust_loopback = true
%s

[[auth.token]]
name = %q
scopes = ["read"]
value_file = "secrets/read.token"

[[auth.token]]
name = %q
scopes = ["borrow"]
value_file = "secrets/borrow.token"

[[auth.token]]
name = %q
scopes = ["read", "admin"]
value_file = "secrets/operator.token"
`, listen, strings.Join(authExtra, "\n"), readName, borrowName, operatorName)
}

// lanRow is one request sent by curl from inside the namespace.
type lanRow struct {
	name    string
	method  string
	path    string
	headers []string

	status int
	// wwwAuth is the exact WWW-Authenticate header wanted ("" for none).
	wwwAuth string
	// errType and scope are the JSON error's type and required_scope.
	errType, scope string
	// count is the vacancyd_auth_total series the request moves
	// ("scope/outcome"), "" for routes that are never authenticated.
	count string
	// fp is the credential fingerprint the refusal's log line must carry;
	// "" skips that check.
	fp string
	// check inspects a 200 answer.
	check func(t *testing.T, r reply)
}

// run sends the row from the namespace and checks the answer.
func (row lanRow) run(t *testing.T, ns *netns.NS, api string) reply {
	t.Helper()
	r := curl(t, ns.Command("curl", curlArgs(row.method, api+row.path, row.headers...)...))
	if r.Status != row.status {
		t.Fatalf("%s %s = %d, want %d: %s", row.method, row.path, r.Status, row.status, r.Body)
	}
	if got := r.Header.Get("WWW-Authenticate"); got != row.wwwAuth {
		t.Errorf("WWW-Authenticate = %q, want %q", got, row.wwwAuth)
	}
	if row.errType != "" {
		e := r.errorBody(t)
		if e.Error.Type != row.errType || e.Error.RequiredScope != row.scope {
			t.Errorf("error type %q, required_scope %q; want %q, %q", e.Error.Type, e.Error.RequiredScope, row.errType, row.scope)
		}
		for _, name := range []string{readName, borrowName, operatorName} {
			if strings.Contains(string(r.Body), name) {
				t.Errorf("refusal names the token %q: %s", name, r.Body)
			}
		}
	}
	if row.check != nil {
		row.check(t, r)
	}
	return r
}

// assertRefusalLogged fails unless the daemon logged the row's refusal with
// the namespace's address as the peer and the row's credential fingerprint.
func (row lanRow) assertRefusalLogged(t *testing.T, lines []logLine, peer string) {
	t.Helper()
	scope, outcome, _ := strings.Cut(row.count, "/")
	want := map[string]string{"peer_host": peer, "outcome": outcome, "scope": scope, "method": row.method, "path": row.path}
	if row.fp != "" {
		want["credential_fp"] = row.fp
	}
	if len(findLog(lines, "request refused", want)) == 0 {
		t.Errorf("%s: no refusal logged with %v", row.name, want)
	}
}

func wantLending(want bool) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		t.Helper()
		if got := statusLending(t, r.Body); got != want {
			t.Errorf("lending_enabled = %v, want %v", got, want)
		}
	}
}

func wantAdminAnswer(enabled bool) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		t.Helper()
		want := map[string]any{"outcome": "lending", "lending_enabled": enabled}
		if got := adminAnswer(t, r); !reflect.DeepEqual(got, want) {
			t.Errorf("admin answer = %v, want %v", got, want)
		}
	}
}

func wantMetrics(t *testing.T, r reply) {
	t.Helper()
	if !strings.Contains(string(r.Body), "vacancyd_auth_total{") {
		t.Errorf("/metrics lacks vacancyd_auth_total:\n%s", r.Body)
	}
}

const (
	wwwMissing = `Bearer realm="vacancyd"`
	wwwInvalid = `Bearer realm="vacancyd", error="invalid_token"`
)

// A caller on the LAN is judged only by the token it presents: none or an
// unknown one gets 401 with the Bearer challenge, the right one by either
// header is admitted, a token without the scope gets 403 naming the scope,
// and an admin token performs admin actions. /healthz and /readyz need
// nothing. Every decision is counted and every refusal logged with the peer's
// address and the credential's fingerprint, never a token.
func TestLANCallersAreJudgedByToken(t *testing.T) {
	ns := netns.New(t)
	tok := newLANTokens(t)
	wrong := newToken(t)
	addr := hostPort(t, ns.HostAddr)
	d := proc.Start(t, addr, tok.config(addr), tok.files())

	// The host side reads metrics and /status from ns.HostAddr, which is not
	// loopback either, so it presents the read token.
	before := authCounts(t, d.API, bearer(tok.read))

	rows := []lanRow{
		{name: "no token", method: "GET", path: "/status", status: 401, wwwAuth: wwwMissing, errType: "missing", scope: "read", count: "read/missing", fp: "none"},
		{name: "no token on /metrics", method: "GET", path: "/metrics", status: 401, wwwAuth: wwwMissing, errType: "missing", scope: "read", count: "read/missing", fp: "none"},
		{name: "wrong token by Authorization", method: "GET", path: "/status", headers: []string{bearer(wrong)}, status: 401, wwwAuth: wwwInvalid, errType: "invalid", scope: "read", count: "read/invalid", fp: fingerprint(wrong)},
		{name: "wrong token by X-Api-Key", method: "GET", path: "/metrics", headers: []string{apiKey(wrong)}, status: 401, wwwAuth: wwwInvalid, errType: "invalid", scope: "read", count: "read/invalid", fp: fingerprint(wrong)},
		{name: "read token by Authorization on /status", method: "GET", path: "/status", headers: []string{bearer(tok.read)}, status: 200, count: "read/allowed", check: wantLending(true)},
		{name: "read token by X-Api-Key on /status", method: "GET", path: "/status", headers: []string{apiKey(tok.read)}, status: 200, count: "read/allowed", check: wantLending(true)},
		{name: "read token by Authorization on /metrics", method: "GET", path: "/metrics", headers: []string{bearer(tok.read)}, status: 200, count: "read/allowed", check: wantMetrics},
		{name: "read token by X-Api-Key on /metrics", method: "GET", path: "/metrics", headers: []string{apiKey(tok.read)}, status: 200, count: "read/allowed", check: wantMetrics},
		{name: "admin+read token reads /status", method: "GET", path: "/status", headers: []string{apiKey(tok.operator)}, status: 200, count: "read/allowed", check: wantLending(true)},
		{name: "borrow token on /status", method: "GET", path: "/status", headers: []string{bearer(tok.borrow)}, status: 403, errType: "forbidden", scope: "read", count: "read/forbidden", fp: fingerprint(tok.borrow)},
		{name: "borrow token on /metrics", method: "GET", path: "/metrics", headers: []string{apiKey(tok.borrow)}, status: 403, errType: "forbidden", scope: "read", count: "read/forbidden", fp: fingerprint(tok.borrow)},
		{name: "healthz without token", method: "GET", path: "/healthz", status: 200},
		{name: "readyz without token", method: "GET", path: "/readyz", status: 200},
		{name: "healthz ignores an unknown token", method: "GET", path: "/healthz", headers: []string{bearer(wrong)}, status: 200},
		{name: "anonymous admin", method: "POST", path: "/admin/lending/disable", headers: []string{intent}, status: 401, wwwAuth: wwwMissing, errType: "missing", scope: "admin", count: "admin/missing", fp: "none"},
		{name: "read token on admin", method: "POST", path: "/admin/lending/disable", headers: []string{intent, bearer(tok.read)}, status: 403, errType: "forbidden", scope: "admin", count: "admin/forbidden", fp: fingerprint(tok.read)},
		{name: "admin token without intent", method: "POST", path: "/admin/lending/disable", headers: []string{bearer(tok.operator)}, status: 403, errType: "missing_intent", scope: "admin", count: "admin/missing_intent", fp: fingerprint(tok.operator)},
		{name: "admin token pauses", method: "POST", path: "/admin/lending/disable", headers: []string{intent, bearer(tok.operator)}, status: 200, count: "admin/allowed", check: wantAdminAnswer(false)},
		{name: "paused, as read by the LAN", method: "GET", path: "/status", headers: []string{bearer(tok.read)}, status: 200, count: "read/allowed", check: wantLending(false)},
		{name: "admin token by X-Api-Key resumes", method: "POST", path: "/admin/lending/enable", headers: []string{intent, apiKey(tok.operator)}, status: 200, count: "admin/allowed", check: wantAdminAnswer(true)},
	}
	want := counts{}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { row.run(t, ns, d.API) })
		if row.count != "" {
			want[row.count]++
		}
	}
	if !lendingEnabled(t, d.API, bearer(tok.read)) {
		t.Error("lending is paused after the admin token resumed it")
	}
	want["read/allowed"] += 2 // the lendingEnabled read above and authCounts' own read below
	assertDelta(t, before, authCounts(t, d.API, bearer(tok.read)), want)

	lines := logLines(d)
	for _, row := range rows {
		if row.status >= 400 {
			row.assertRefusalLogged(t, lines, ns.PeerAddr)
		}
	}
	if len(findLog(lines, "listener accepts connections from outside loopback; credentials reach it unencrypted (no TLS)", map[string]string{"level": "WARN", "addr": addr})) == 0 {
		t.Errorf("no startup WARN for the API listener on %s", addr)
	}
	assertNoSecrets(t, d, tok.read, tok.borrow, tok.operator, wrong)
}

// allowed_sources refuses a LAN caller outside the list with 403
// source_not_allowed before any credential is looked at: the right token does
// not help, an unknown one does not earn a 401, and the refusal logs no
// fingerprint. A caller inside the list is judged as usual.
func TestLANCallerOutsideAllowedSources(t *testing.T) {
	ns := netns.New(t)
	tok := newLANTokens(t)
	wrong := newToken(t)
	addr := hostPort(t, ns.HostAddr)
	// The host side's own address is allowed; the namespace's is not.
	d := proc.Start(t, addr, tok.config(addr, fmt.Sprintf("allowed_sources = [%q]", ns.HostAddr+"/32")), tok.files())

	before := authCounts(t, d.API, bearer(tok.read))
	rows := []lanRow{
		{name: "read token by Authorization", method: "GET", path: "/status", headers: []string{bearer(tok.read)}, status: 403, errType: "source_not_allowed", scope: "read", count: "read/source_not_allowed", fp: "none"},
		{name: "read token by X-Api-Key", method: "GET", path: "/metrics", headers: []string{apiKey(tok.read)}, status: 403, errType: "source_not_allowed", scope: "read", count: "read/source_not_allowed", fp: "none"},
		{name: "unknown token", method: "GET", path: "/status", headers: []string{bearer(wrong)}, status: 403, errType: "source_not_allowed", scope: "read", count: "read/source_not_allowed", fp: "none"},
		{name: "admin token", method: "POST", path: "/admin/lending/disable", headers: []string{intent, bearer(tok.operator)}, status: 403, errType: "source_not_allowed", scope: "admin", count: "admin/source_not_allowed", fp: "none"},
	}
	want := counts{}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { row.run(t, ns, d.API) })
		want[row.count]++
	}
	// The allowed host side, with the same read token, is admitted.
	if !lendingEnabled(t, d.API, bearer(tok.read)) {
		t.Error("lending was paused by a caller outside allowed_sources")
	}
	want["read/allowed"] += 2 // lendingEnabled and authCounts
	assertDelta(t, before, authCounts(t, d.API, bearer(tok.read)), want)

	lines := logLines(d)
	for _, row := range rows {
		row.assertRefusalLogged(t, lines, ns.PeerAddr)
	}
	assertNoSecrets(t, d, tok.read, tok.borrow, tok.operator, wrong)
}

// With no token configured and allow_unauthenticated_remote = true, a LAN
// caller may read without a token, but anonymous remote admin stays
// forbidden, with or without a made-up credential, and changes nothing.
func TestLANAnonymousRemoteNeverAdmin(t *testing.T) {
	ns := netns.New(t)
	addr := hostPort(t, ns.HostAddr)
	made := newToken(t)
	d := proc.Start(t, addr, fmt.Sprintf(`[server]
listen = %q

[auth]
allow_unauthenticated_remote = true
`, addr), nil)

	before := authCounts(t, d.API)
	rows := []lanRow{
		{name: "anonymous /status", method: "GET", path: "/status", status: 200, count: "read/allowed", check: wantLending(true)},
		{name: "anonymous /metrics", method: "GET", path: "/metrics", status: 200, count: "read/allowed", check: wantMetrics},
		{name: "anonymous pause", method: "POST", path: "/admin/lending/disable", headers: []string{intent}, status: 403, errType: "forbidden", scope: "admin", count: "admin/forbidden", fp: "none"},
		{name: "anonymous resume", method: "POST", path: "/admin/lending/enable", headers: []string{intent}, status: 403, errType: "forbidden", scope: "admin", count: "admin/forbidden", fp: "none"},
		{name: "pause with a made-up token", method: "POST", path: "/admin/lending/disable", headers: []string{intent, bearer(made)}, status: 403, errType: "forbidden", scope: "admin", count: "admin/forbidden", fp: fingerprint(made)},
		{name: "still lending, as read by the LAN", method: "GET", path: "/status", status: 200, count: "read/allowed", check: wantLending(true)},
	}
	want := counts{}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { row.run(t, ns, d.API) })
		want[row.count]++
	}
	// The daemon listens only on the veth address, so "loopback" here is the
	// host side of the pair: a second, independent reader of the state.
	if !lendingEnabled(t, d.API) {
		t.Error("anonymous remote admin paused lending")
	}
	want["read/allowed"] += 2 // lendingEnabled and authCounts
	assertDelta(t, before, authCounts(t, d.API), want)

	lines := logLines(d)
	for _, row := range rows {
		if row.status >= 400 {
			row.assertRefusalLogged(t, lines, ns.PeerAddr)
		}
	}
	if len(findLog(lines, "lending paused", nil)) != 0 {
		t.Error("the daemon logged a pause")
	}
	assertNoSecrets(t, d, made)
}

// Remote listeners require credentials: with no token configured,
// check-config refuses a listener on a LAN address, naming server.listen, and
// `vacancyd run` refuses to start on it. The same file with one token passes.
func TestCheckConfigRefusesLANListenerWithoutToken(t *testing.T) {
	ns := netns.New(t)
	addr := hostPort(t, ns.HostAddr)
	dir := t.TempDir()
	bad := filepath.Join(dir, "exposed.toml")
	if err := os.WriteFile(bad, fmt.Appendf(nil, "[server]\nlisten = %q\n", addr), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out := runBinary(t, "check-config", "--config", bad)
	if code != 1 {
		t.Errorf("check-config exit = %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "server.listen: ") || !strings.Contains(out, addr) || !strings.Contains(out, "no [[auth.token]]") {
		t.Errorf("check-config output does not name server.listen, %s and the missing token:\n%s", addr, out)
	}

	code, out = runBinary(t, "run", "--config", bad, "--log-format", "json")
	if code != 1 {
		t.Errorf("run exit = %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "server.listen") {
		t.Errorf("run output does not name server.listen:\n%s", out)
	}
	if strings.Contains(out, `"msg":"listening"`) {
		t.Errorf("run opened a listener on an invalid configuration:\n%s", out)
	}

	// Control: the refusal is about the missing token, not the address.
	tok := newLANTokens(t)
	for name, content := range tok.files() {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := filepath.Join(dir, "tokens.toml")
	if err := os.WriteFile(good, []byte(tok.config(addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runBinary(t, "check-config", "--config", good); code != 0 {
		t.Errorf("check-config with tokens exit = %d, want 0:\n%s", code, out)
	}
}
