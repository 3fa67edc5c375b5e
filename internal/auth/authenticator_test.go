package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vacancyd/vacancyd/internal/config"
)

// TestTooLongCredentialIsNotHashed counts the authenticator's hash calls: a
// credential over 512 bytes is refused with none, while a 512-byte one is
// hashed once (and refused, being unknown).
func TestTooLongCredentialIsNotHashed(t *testing.T) {
	a, logs, _ := newTestAuth(t, withTokens(), "linux")
	var hashes atomic.Int64
	a.hash = func(b []byte) digest {
		hashes.Add(1)
		return sha256.Sum256(b)
	}
	h := a.Require(readRoute, echoPrincipal)
	for _, c := range []struct {
		name   string
		header [2]string
		status int
		hashes int64
	}{
		{"513-byte bearer", bearer(strings.Repeat("A", 513)), 401, 0},
		{"513-byte x-api-key", apiKey(strings.Repeat("A", 513)), 401, 0},
		{"64 KiB bearer", bearer(strings.Repeat("A", 64<<10)), 401, 0},
		{"512-byte unknown", apiKey(strings.Repeat("A", 512)), 401, 1},
		{"known", bearer(readerValue), 200, 1},
		{"no credential", [2]string{"Accept", "*/*"}, 401, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			hashes.Store(0)
			ans := send(t, h, fromRemote, request{header: [][2]string{c.header}})
			if ans.status != c.status || hashes.Load() != c.hashes {
				t.Errorf("status %d with %d hashes; want %d with %d", ans.status, hashes.Load(), c.status, c.hashes)
			}
		})
	}
	if !strings.Contains(logs.String(), "credential_fp=too_long") {
		t.Errorf("the refusal of an oversize credential is not logged as such:\n%s", logs)
	}
}

// TestRefusalLog: a refusal logs the peer and the first 8 hex digits of the
// presented credential's SHA-256 (or none), never the credential; an admission
// by token logs the token's name.
func TestRefusalLog(t *testing.T) {
	a, logs, _ := newTestAuth(t, withTokens(), "linux")
	h := a.Require(readRoute, echoPrincipal)
	sum := sha256.Sum256([]byte(unknownValue))
	fp := hex.EncodeToString(sum[:])[:8]

	send(t, h, fromRemote, request{header: [][2]string{bearer(unknownValue)}})
	send(t, h, fromRemote, request{})
	send(t, h, fromRemote, request{header: [][2]string{bearer(readerValue)}})
	log := logs.String()
	peer := "peer=" + remoteAddr().String() + ":"
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got:\n%s", log)
	}
	if !strings.Contains(lines[0], "credential_fp="+fp) || !strings.Contains(lines[0], peer) || !strings.Contains(lines[0], "outcome=invalid") {
		t.Errorf("unknown-credential refusal: %s (want fp %s and %s)", lines[0], fp, peer)
	}
	if !strings.Contains(lines[1], "credential_fp=none") || !strings.Contains(lines[1], peer) {
		t.Errorf("missing-credential refusal: %s", lines[1])
	}
	if !strings.Contains(lines[2], "principal=token:reader") {
		t.Errorf("admission: %s", lines[2])
	}
	for _, s := range allTestSecrets {
		if strings.Contains(log, s) {
			t.Error("a secret reached the log")
		}
	}
}

// TestCounterPreinitialised: every scope and outcome is exported at 0 before
// any request, and a second Authenticator on the same registry shares the
// counter instead of failing.
func TestCounterPreinitialised(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(noTokens(), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(a.counter, MetricName); n != len(allScopes)*len(Outcomes) {
		t.Errorf("%d series, want %d", n, len(allScopes)*len(Outcomes))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != MetricName || len(mfs[0].GetMetric()) != 27 {
		t.Fatalf("registry holds %v", mfs)
	}
	for _, m := range mfs[0].GetMetric() {
		if m.GetCounter().GetValue() != 0 {
			t.Errorf("%v starts at %v", m.GetLabel(), m.GetCounter().GetValue())
		}
	}
	b, err := New(noTokens(), Options{Registerer: reg})
	if err != nil {
		t.Fatalf("second Authenticator on one registry: %v", err)
	}
	send(t, b.Require(readRoute, echoPrincipal), fromV4, request{})
	if v := testutil.ToFloat64(a.counter.WithLabelValues("read", "allowed")); v != 1 {
		t.Errorf("shared counter read %v, want 1", v)
	}
}

// TestWarnIfExposed binds real listeners: loopback ones draw no warning, a
// wildcard or LAN one does, with the listener's name.
func TestWarnIfExposed(t *testing.T) {
	a, logs, _ := newTestAuth(t, withTokens(), "linux")
	listen := func(addr string) net.Addr {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		return ln.Addr()
	}
	if a.WarnIfExposed("api", listen("127.0.0.1:0")) {
		t.Error("warned for 127.0.0.1")
	}
	if haveIPv6Loopback() && a.WarnIfExposed("api6", listen("[::1]:0")) {
		t.Error("warned for ::1")
	}
	if logs.String() != "" {
		t.Errorf("loopback listeners logged: %s", logs)
	}
	if !a.WarnIfExposed("ollama", listen("0.0.0.0:0")) {
		t.Error("no warning for 0.0.0.0")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "listener=ollama") {
		t.Errorf("warning: %s", logs)
	}
	if ip := remoteAddr(); remoteIP.IsValid() && !a.WarnIfExposed("lan", listen(net.JoinHostPort(ip.String(), "0"))) {
		t.Error("no warning for a LAN address")
	}
}

// TestUpdate applies new settings live; a bad update changes nothing.
func TestUpdate(t *testing.T) {
	a, _, _ := newTestAuth(t, withTokens(), "linux")
	if _, got := judgeRemote(a, readerValue, Read); got != "allowed" {
		t.Fatalf("before: %s", got)
	}
	next := config.Auth{TrustLoopback: true, Tokens: []config.Token{tok("newreader", unknownValue, "read")}}
	if err := a.Update(next); err != nil {
		t.Fatal(err)
	}
	if _, got := judgeRemote(a, readerValue, Read); got != "invalid" {
		t.Errorf("removed token: %s", got)
	}
	if p, got := judgeRemote(a, unknownValue, Read); got != "allowed" || p.Token != "newreader" {
		t.Errorf("added token: %s %v", got, p)
	}
	bad := withSources(next, "10.0.0.1/8")
	bad.Tokens = nil
	if err := a.Update(bad); err == nil {
		t.Fatal("Update accepted a malformed allowed_sources entry")
	}
	if _, got := judgeRemote(a, unknownValue, Read); got != "allowed" {
		t.Errorf("a failed Update changed the settings: %s", got)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]config.Auth{
		"unknown scope":  {Tokens: []config.Token{tok("a", readerValue, "write")}},
		"no scope":       {Tokens: []config.Token{tok("a", readerValue)}},
		"no value":       {Tokens: []config.Token{{Name: "a", Scopes: []string{"read"}}}},
		"duplicate name": {Tokens: []config.Token{tok("a", readerValue, "read"), tok("a", borrowerValue, "borrow")}},
		"unnamed":        {Tokens: []config.Token{tok("", readerValue, "read")}},
		"too long":       {Tokens: []config.Token{tok("a", strings.Repeat("x", 513), "read")}},
		"not b64token":   {Tokens: []config.Token{tok("a", "has space", "read")}},
		"malformed cidr": {AllowedSources: []string{"10.0.0.0/33"}},
		"host bits":      {AllowedSources: []string{"10.0.0.1/8"}},
		"not an address": {AllowedSources: []string{"lan"}},
	} {
		if _, err := New(cfg, Options{}); err == nil {
			t.Errorf("%s: New accepted it", name)
		} else if strings.Contains(err.Error(), readerValue) {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
}

// TestUnreadableFileAtStartDisablesOnlyThatToken: New with a value_file token
// whose file is gone keeps the other tokens working and the posture closed.
func TestUnreadableFileAtStartDisablesOnlyThatToken(t *testing.T) {
	cfg := withTokens()
	cfg.Tokens = append(cfg.Tokens, config.Token{Name: "gone", Scopes: []string{"borrow"}, ValueFile: "/nonexistent/x", FilePath: "/nonexistent/x"})
	logs := &syncBuffer{}
	a, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, got := judgeRemote(a, borrowerValue, Borrow); got != "allowed" {
		t.Errorf("other token: %s", got)
	}
	if !strings.Contains(logs.String(), "token=gone") {
		t.Errorf("the unusable file was not logged: %s", logs)
	}
	if a.Posture().Tokens[4].Active {
		t.Error("the token without a file is active")
	}
}

// TestPostureHoldsNoSecret: /status material names tokens, never values.
func TestPostureHoldsNoSecret(t *testing.T) {
	a, _, _ := newTestAuth(t, withSources(withTokens(), "10.0.0.0/8"), "linux")
	p := a.Posture()
	if len(p.Tokens) != 4 || p.Tokens[2].Name != "operator" || strings.Join(p.Tokens[2].Scopes, ",") != "read,admin" {
		t.Errorf("posture %+v", p)
	}
	if got := strings.Join(p.AllowedSources, ","); got != "10.0.0.0/8" {
		t.Errorf("allowed sources %q", got)
	}
}

// TestRequireSetsPrincipal: the handler sees the Principal, with the peer.
func TestRequireSetsPrincipal(t *testing.T) {
	a, _, _ := newTestAuth(t, withTokens(), "linux")
	var got Principal
	h := a.Require(borrowRoute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = PrincipalFrom(r.Context())
	}))
	send(t, h, fromV4, request{header: [][2]string{apiKey(borrowerValue)}})
	if got.Via != ViaToken || got.Token != "borrower" || !got.Has(Borrow) || got.Has(Read) || !got.Peer.Addr().IsLoopback() {
		t.Errorf("principal %+v", got)
	}
	send(t, h, fromV4, request{})
	if got.Via != ViaLoopback || !got.Has(Read) || !got.Has(Borrow) || got.Has(Admin) {
		t.Errorf("loopback principal on linux %+v", got)
	}
}
