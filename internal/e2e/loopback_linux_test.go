//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"reflect"
	"testing"

	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// The seed's loopback examples, sent with real curl from this machine: with
// loopback trusted, pausing needs no token but still the intent header; on
// Linux resuming is beyond loopback trust (403 administrator_required) until
// an admin token is presented, which works from the machine itself as it
// does from the network.
func TestLoopbackOperatorPausesButNeedsAdminToResume(t *testing.T) {
	operator := newToken(t)
	addr := hostPort(t, "127.0.0.1")
	d := proc.Start(t, addr, fmt.Sprintf(`[server]
listen = %q

[auth]
trust_loopback = true

[[auth.token]]
name = "operator"
scopes = ["read", "admin"]
value_file = "secrets/operator.token"
`, addr), map[string]string{"secrets/operator.token": operator + "\n"})

	hostCurl := func(method, path string, headers ...string) reply {
		t.Helper()
		return curl(t, exec.Command("curl", curlArgs(method, d.API+path, headers...)...))
	}
	lending := func() bool {
		t.Helper()
		r := hostCurl("GET", "/status") // loopback reads need no token
		if r.Status != 200 {
			t.Fatalf("loopback GET /status = %d: %s", r.Status, r.Body)
		}
		return statusLending(t, r.Body)
	}
	wantAnswer := func(r reply, enabled bool) {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
		}
		want := map[string]any{"outcome": "lending", "lending_enabled": enabled}
		if got := adminAnswer(t, r); !reflect.DeepEqual(got, want) {
			t.Errorf("answer %v, want %v", got, want)
		}
	}
	wantRefusal := func(r reply, errType string) {
		t.Helper()
		if r.Status != 403 {
			t.Fatalf("status %d, want 403: %s", r.Status, r.Body)
		}
		if e := r.errorBody(t); e.Error.Type != errType || e.Error.RequiredScope != "admin" {
			t.Errorf("error %q (required_scope %q), want %q (admin)", e.Error.Type, e.Error.RequiredScope, errType)
		}
	}

	before := authCounts(t, d.API)

	// Without the intent header even the loopback pause is refused.
	wantRefusal(hostCurl("POST", "/admin/lending/disable"), "missing_intent")
	if !lending() {
		t.Fatal("a pause without the intent header took effect")
	}

	// curl -H "X-Vacancyd-Admin: 1" -X POST http://127.0.0.1:<port>/admin/lending/disable
	wantAnswer(hostCurl("POST", "/admin/lending/disable", intent), false)
	if lending() {
		t.Fatal("/status still says lending after the loopback pause")
	}

	// Resuming over loopback without a token needs an administrator.
	wantRefusal(hostCurl("POST", "/admin/lending/enable", intent), "administrator_required")
	if lending() {
		t.Fatal("a loopback resume without a token took effect")
	}

	// An admin token resumes from the machine itself.
	wantAnswer(hostCurl("POST", "/admin/lending/enable", intent, bearer(operator)), true)
	if !lending() {
		t.Fatal("/status says paused after the admin token resumed")
	}

	assertDelta(t, before, authCounts(t, d.API), counts{
		"admin/missing_intent":         1,
		"admin/allowed":                2,
		"admin/administrator_required": 1,
		"read/allowed":                 5, // four /status reads and authCounts' own
	})
	lines := logLines(d)
	if len(findLog(lines, "request refused", map[string]string{"outcome": "administrator_required", "path": "/admin/lending/enable", "peer_host": "127.0.0.1", "credential_fp": "none"})) != 1 {
		t.Error("the administrator_required refusal was not logged once with the loopback peer")
	}
	assertNoSecrets(t, d, operator)
}
