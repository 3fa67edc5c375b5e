package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
)

// These run admin-request in process against a socket served by this
// process, which owns both the socket and its directory and so is trusted.
// The same command as other uids, against real services and untrusted
// servers, is proved with the real binary in internal/adminsock.

type reqOutcome struct {
	code           int
	stdout, stderr string
}

func runAdminRequest(t *testing.T, args ...string) reqOutcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"admin-request"}, args...), &out, &errb, func(string) (string, bool) { return "", false })
	return reqOutcome{code, out.String(), errb.String()}
}

// serveAnswer serves a socket whose every answer is answer, counting requests.
func serveAnswer(t *testing.T, answer admin.Response) (string, *atomic.Int32) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the admin socket is Linux only")
	}
	path := filepath.Join(t.TempDir(), "run", "admin.sock")
	l, err := adminsock.Listen(adminsock.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Serve(ctx, adminsock.HandlerFunc(func(context.Context, admin.Caller, []byte) admin.Response {
			calls.Add(1)
			return answer
		}))
	}()
	t.Cleanup(func() { cancel(); <-done; l.Close() })
	return path, &calls
}

func writeRequest(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const pauseRequest = `{"protocol_version": 1, "action": {"kind": "pause"}}`

// Success prints the service's answer, and only that, on stdout.
func TestAdminRequestPrintsAnswer(t *testing.T) {
	sock, calls := serveAnswer(t, admin.Response{Answer: map[string]any{"outcome": "lending", "lending_enabled": false}})
	r := runAdminRequest(t, "--request", writeRequest(t, pauseRequest), "--socket", sock)
	if r.code != ExitOK || r.stdout != `{"lending_enabled":false,"outcome":"lending"}`+"\n" || r.stderr != "" {
		t.Fatalf("got %+v", r)
	}

	// --request - reads standard input.
	adminRequestStdin = strings.NewReader(pauseRequest)
	defer func() { adminRequestStdin = os.Stdin }()
	if r := runAdminRequest(t, "--request", "-", "--socket", sock); r.code != ExitOK {
		t.Fatalf("stdin request: %+v", r)
	}
	if calls.Load() != 2 {
		t.Fatalf("service saw %d requests, want 2", calls.Load())
	}
}

// Each refusal type has its documented exit code; the reason (and every
// settings problem) goes to stderr, nothing to stdout.
func TestAdminRequestRefusalExitCodes(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		code int
	}{
		{admin.ErrAdministratorRequired, ExitRefused},
		{admin.ErrStaleRevision, ExitStaleRevision},
		{admin.ErrInvalidSettings, ExitInvalidSettings},
		{admin.ErrInvalidRequest, ExitBadRequest},
		{admin.ErrUnknownAction, ExitBadRequest},
		{admin.ErrUnsupportedVersion, ExitBadRequest},
		{admin.ErrNotFound, ExitActionFailed},
		{admin.ErrNotAvailable, ExitActionFailed},
		{admin.ErrInternal, ExitActionFailed},
	} {
		body := &admin.ErrorBody{Type: tc.typ, Message: "because " + tc.typ}
		if tc.typ == admin.ErrInvalidSettings {
			body.Problems = []admin.Problem{{Key: "upstream[0].target", Message: "bad URL"}, {Key: "lending.idle_after", Message: "not a duration"}}
		}
		sock, _ := serveAnswer(t, admin.Response{Error: body})
		r := runAdminRequest(t, "--request", writeRequest(t, pauseRequest), "--socket", sock)
		if r.code != tc.code || r.stdout != "" || !strings.Contains(r.stderr, "refused ("+tc.typ+"): because "+tc.typ) {
			t.Errorf("%s: got %+v, want exit %d", tc.typ, r, tc.code)
		}
		if tc.typ == admin.ErrInvalidSettings && !strings.Contains(r.stderr, "upstream[0].target: bad URL\nlending.idle_after: not a duration\n") {
			t.Errorf("problems not listed: %q", r.stderr)
		}
	}
}

// A request file that cannot be read or is not exactly one valid request
// exits 45 and never reaches the service.
func TestAdminRequestBadFile(t *testing.T) {
	sock, calls := serveAnswer(t, admin.Response{Answer: map[string]string{"outcome": "x"}})
	for name, path := range map[string]string{
		"missing file":  filepath.Join(t.TempDir(), "nope.json"),
		"empty":         writeRequest(t, ""),
		"two requests":  writeRequest(t, pauseRequest+"\n"+pauseRequest),
		"unknown kind":  writeRequest(t, `{"protocol_version": 1, "action": {"kind": "shutdown"}}`),
		"wrong version": writeRequest(t, `{"protocol_version": 2, "action": {"kind": "pause"}}`),
		"oversized":     writeRequest(t, `{"pad": "`+strings.Repeat("x", admin.MaxRequestBytes)+`"}`),
	} {
		r := runAdminRequest(t, "--request", path, "--socket", sock)
		if r.code != ExitBadRequest || r.stdout != "" || r.stderr == "" {
			t.Errorf("%s: got exit %d, stderr %q", name, r.code, r.stderr)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("bad requests reached the service %d times", n)
	}
}

func TestAdminRequestNoServiceAndUsage(t *testing.T) {
	req := writeRequest(t, pauseRequest)
	r := runAdminRequest(t, "--request", req, "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if r.code != ExitNoService || (runtime.GOOS == "linux" && !strings.Contains(r.stderr, "no service")) {
		t.Errorf("missing socket: %+v", r)
	}
	if r := runAdminRequest(t); r.code != ExitUsage || !strings.Contains(r.stderr, "--request") {
		t.Errorf("no --request: %+v", r)
	}
	if r := runAdminRequest(t, "--request", req, "extra"); r.code != ExitUsage {
		t.Errorf("extra argument: %+v", r)
	}
}

// The owner console's approval flow reports a declined prompt with the exit
// code admin-request documents for it.
func TestAdminRequestDeclinedCodeMatchesElevation(t *testing.T) {
	if adminsock.DeclinedExitCode != ExitDeclined {
		t.Errorf("adminsock.DeclinedExitCode = %d, ExitDeclined = %d", adminsock.DeclinedExitCode, ExitDeclined)
	}
}
