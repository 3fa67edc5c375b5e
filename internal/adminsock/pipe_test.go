package adminsock

// The Windows admin pipe's decisions and its serving loop, tested on every
// platform: the loop runs here over a Unix socket with the token reading
// replaced, since only the kernel calls are Windows'.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
)

const (
	testUserSID = "S-1-5-21-1004336348-1177238915-682003330-1001"
	pauseReq    = `{"protocol_version": 1, "action": {"kind": "pause"}}`
)

// The pipe is reachable by signed-in users but never by network logons, and
// no one but LocalSystem, Administrators and the service's own account may
// add server instances of it.
func TestPipeSDDL(t *testing.T) {
	const base = "D:P(D;;GA;;;NU)(A;;GA;;;SY)(A;;GA;;;BA)"
	for _, tc := range []struct {
		service, want string
	}{
		{"", base + "(A;;0x12019b;;;IU)"},
		{sidLocalSystem, base + "(A;;0x12019b;;;IU)"},
		{sidAdministrators, base + "(A;;0x12019b;;;IU)"},
		{testUserSID, base + "(A;;GA;;;" + testUserSID + ")(A;;0x12019b;;;IU)"},
	} {
		if got := pipeSDDL(tc.service); got != tc.want {
			t.Errorf("pipeSDDL(%q) = %s, want %s", tc.service, got, tc.want)
		}
	}
	// The deny ACE comes first, or an administrator's network logon would
	// be let in by the BA entry before it was denied.
	if s := pipeSDDL(""); !strings.HasPrefix(s, "D:P(D;;GA;;;NU)") {
		t.Errorf("network logons are not denied first: %s", s)
	}
	const (
		fileGenericRead  = accessReadControl | accessFileReadData | accessFileReadAttributes | accessFileReadEA | accessSynchronize
		fileGenericWrite = accessReadControl | accessFileWriteData | accessFileWriteAttributes | accessFileWriteEA | accessFileCreatePipeInst | accessSynchronize
	)
	if fileGenericRead != 0x120089 || fileGenericWrite != 0x120116 {
		t.Fatalf("FILE_GENERIC_READ/WRITE spelled wrong: %#x %#x", fileGenericRead, fileGenericWrite)
	}
	if want := (fileGenericRead | fileGenericWrite) &^ accessFileCreatePipeInst; pipeClientAccess != want {
		t.Errorf("interactive users get %#x, want GRGW less FILE_CREATE_PIPE_INSTANCE = %#x", pipeClientAccess, want)
	}
	iu := pipeSDDL("")
	hex := iu[strings.Index(iu, "(A;;0x")+len("(A;;0x"):]
	hex = hex[:strings.Index(hex, ";")]
	granted, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || granted != pipeClientAccess || granted&accessFileCreatePipeInst != 0 {
		t.Errorf("IU ACE grants %q (%v); want %#x without FILE_CREATE_PIPE_INSTANCE", hex, err, pipeClientAccess)
	}
}

// An administrator is LocalSystem or an elevated member of Administrators;
// an unelevated administrator's token does not count, nor does elevation
// without membership. The account is always the user SID.
func TestDecideWindowsCaller(t *testing.T) {
	for _, tc := range []struct {
		name    string
		facts   tokenFacts
		admin   bool
		account string
	}{
		{"standard account", tokenFacts{sid: testUserSID}, false, testUserSID},
		{"elevated administrator", tokenFacts{sid: testUserSID, elevated: true, inAdministrators: true}, true, testUserSID},
		{"unelevated administrator (UAC filtered token)", tokenFacts{sid: testUserSID}, false, testUserSID},
		{"administrators enabled but not elevated", tokenFacts{sid: testUserSID, inAdministrators: true}, false, testUserSID},
		{"elevated but not in Administrators", tokenFacts{sid: testUserSID, elevated: true}, false, testUserSID},
		{"LocalSystem by flag", tokenFacts{sid: sidLocalSystem, isSystem: true}, true, sidLocalSystem},
		{"LocalSystem by SID", tokenFacts{sid: sidLocalSystem}, true, sidLocalSystem},
		{"isSystem without a SID names no one", tokenFacts{isSystem: true, elevated: true, inAdministrators: true}, false, ""},
		{"no SID", tokenFacts{}, false, ""},
	} {
		c, why := decideWindowsCaller(tc.facts)
		if c.Administrator != tc.admin || c.Account != tc.account || c.Via != "pipe" || why == "" {
			t.Errorf("%s: got %+v (%s), want administrator=%v account=%q via pipe", tc.name, c, why, tc.admin, tc.account)
		}
	}
}

// A client trusts the pipe only when the process serving it is the running
// vacancyd service's process.
func TestPipeServerTrust(t *testing.T) {
	notInstalled := errors.New("The specified service does not exist as an installed service.")
	for _, tc := range []struct {
		name  string
		facts pipeServerFacts
		want  string // "" trusted, else a word of the reason
	}{
		{"the service's own process", pipeServerFacts{serverPID: 4242, serviceState: serviceRunning, servicePID: 4242}, ""},
		{"another process squats the pipe", pipeServerFacts{serverPID: 666, serviceState: serviceRunning, servicePID: 4242}, "runs as process 4242"},
		{"service stopped", pipeServerFacts{serverPID: 666, serviceState: 1}, "not running (state stopped)"},
		{"service starting", pipeServerFacts{serverPID: 666, serviceState: 2, servicePID: 666}, "start pending"},
		{"service not installed", pipeServerFacts{serverPID: 666, serviceErr: notInstalled}, "cannot be queried"},
		{"server pid unknown", pipeServerFacts{serviceState: serviceRunning, servicePID: 4242}, "did not say"},
		{"running but no pid", pipeServerFacts{serverPID: 666, serviceState: serviceRunning}, "not running"},
	} {
		got := pipeServerUntrusted(tc.facts)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: pipeServerUntrusted = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestIsUntrusted(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&UntrustedError{Path: "/run/x", UID: 7, Reason: "r"}, true},
		{&PipeUntrustedError{Pipe: PipeName, PID: 7, Reason: "r"}, true},
		{fmt.Errorf("wrapped: %w", &PipeUntrustedError{Pipe: PipeName}), true},
		{fmt.Errorf("%w (gone)", ErrNoService), false},
		{ErrNotSupported, false},
		{nil, false},
	} {
		if got := IsUntrusted(tc.err); got != tc.want {
			t.Errorf("IsUntrusted(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// pipeHandler records what reached it and answers {"outcome":"ok"}.
type pipeHandler struct {
	mu      sync.Mutex
	callers []admin.Caller
	reqs    []string
}

func (h *pipeHandler) Handle(_ context.Context, c admin.Caller, req []byte) admin.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.callers = append(h.callers, c)
	h.reqs = append(h.reqs, string(req))
	return admin.Response{Answer: map[string]any{"outcome": "ok", "administrator": c.Administrator}}
}

func (h *pipeHandler) calls() []admin.Caller {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]admin.Caller(nil), h.callers...)
}

// pipeOverSocket serves a PipeListener over a Unix socket, with identify
// in place of reading a Windows token, until the test ends.
func pipeOverSocket(t *testing.T, identify identifyFunc, h Handler) (dial func() net.Conn) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the loop is exercised over a Unix socket; Windows runs the real pipe")
	}
	path := filepath.Join(t.TempDir(), "p.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := newPipeListener(Options{ReadTimeout: 2 * time.Second}.withDefaults(), ln, identify)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close after Serve: %v", err)
		}
	})
	return func() net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// The pipe identifies the caller only after reading the request, names it
// by SID, decides administrators by decideWindowsCaller, and answers once.
func TestPipeServeIdentifiesAfterReading(t *testing.T) {
	var mu sync.Mutex
	facts := tokenFacts{sid: testUserSID}
	var sawRequest []bool
	h := &pipeHandler{}
	dial := pipeOverSocket(t, func(c net.Conn) (tokenFacts, error) {
		mu.Lock()
		defer mu.Unlock()
		// By now the whole request is read: nothing more comes.
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := c.Read(make([]byte, 1))
		sawRequest = append(sawRequest, n == 0 && err != nil)
		return facts, nil
	}, h)

	for _, tc := range []struct {
		facts tokenFacts
		admin bool
	}{
		{tokenFacts{sid: testUserSID}, false},
		{tokenFacts{sid: testUserSID, elevated: true, inAdministrators: true}, true},
		{tokenFacts{sid: sidLocalSystem, isSystem: true}, true},
		{tokenFacts{sid: testUserSID, inAdministrators: true}, false},
	} {
		mu.Lock()
		facts = tc.facts
		mu.Unlock()
		ans, err := exchange(context.Background(), dial(), []byte(pauseReq))
		if err != nil {
			t.Fatalf("%+v: exchange: %v", tc.facts, err)
		}
		want := fmt.Sprintf(`{"administrator":%v,"outcome":"ok"}`, tc.admin)
		if string(ans) != want {
			t.Errorf("%+v: answer %s, want %s", tc.facts, ans, want)
		}
	}
	calls := h.calls()
	if len(calls) != 4 {
		t.Fatalf("handler called %d times, want 4", len(calls))
	}
	for i, c := range calls {
		if c.Via != "pipe" || c.Account == "" {
			t.Errorf("call %d: caller %+v, want via pipe with an account", i, c)
		}
	}
	if calls[2].Account != sidLocalSystem {
		t.Errorf("LocalSystem named %q", calls[2].Account)
	}
	for i, ok := range sawRequest {
		if !ok {
			t.Errorf("call %d: identified before the request was read", i)
		}
	}
}

// A caller whose token cannot be read, or names no account, gets no answer
// and reaches no handler; so does a client that sends nothing.
func TestPipeServeRefusesUnidentified(t *testing.T) {
	var mu sync.Mutex
	var idErr error
	var facts tokenFacts
	h := &pipeHandler{}
	dial := pipeOverSocket(t, func(net.Conn) (tokenFacts, error) {
		mu.Lock()
		defer mu.Unlock()
		return facts, idErr
	}, h)

	set := func(f tokenFacts, err error) {
		mu.Lock()
		facts, idErr = f, err
		mu.Unlock()
	}
	set(tokenFacts{sid: testUserSID}, errors.New("ERROR_CANT_OPEN_ANONYMOUS"))
	if ans, err := exchange(context.Background(), dial(), []byte(pauseReq)); err == nil {
		t.Errorf("unreadable token: answered %s", ans)
	}
	set(tokenFacts{}, nil)
	if ans, err := exchange(context.Background(), dial(), []byte(pauseReq)); err == nil {
		t.Errorf("token naming no account: answered %s", ans)
	}
	set(tokenFacts{sid: testUserSID}, nil)
	c := dial()
	c.(*net.UnixConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 16)); n != 0 {
		t.Errorf("empty request: read %d bytes (%v), want none", n, err)
	}
	c.Close()
	if calls := h.calls(); len(calls) != 0 {
		t.Errorf("handler reached %d times: %+v", len(calls), calls)
	}
}

// Serve returns nil, closing the listener, when its context ends.
func TestPipeServeStopsWithContext(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("over a Unix socket")
	}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l := newPipeListener(Options{}.withDefaults(), ln, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, &pipeHandler{}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("listener still open after Serve returned: %v", err)
	}
}

// flakyListener fails Accept a number of times, then reports closed.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
	calls int
}

func (f *flakyListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New("ERROR_NO_SYSTEM_RESOURCES")
	}
	return nil, net.ErrClosed
}

func (f *flakyListener) Close() error { return nil }

// Transient accept failures are ridden out; a run of them longer than
// pipeAcceptRetries ends Serve with an error so the pipe is recreated.
func TestPipeServeAcceptFailures(t *testing.T) {
	f := &flakyListener{fails: 3}
	l := newPipeListener(Options{}.withDefaults(), f, nil)
	if err := l.Serve(context.Background(), &pipeHandler{}); err != nil {
		t.Errorf("after 3 transient failures Serve = %v, want nil at close", err)
	}
	if f.calls != 4 {
		t.Errorf("Accept called %d times, want 4", f.calls)
	}
	if testing.Short() {
		return
	}
	f = &flakyListener{fails: pipeAcceptRetries + 5}
	l = newPipeListener(Options{}.withDefaults(), f, nil)
	if err := l.Serve(context.Background(), &pipeHandler{}); err == nil {
		t.Error("endless accept failures: Serve = nil, want an error")
	}
	if f.calls != pipeAcceptRetries+1 {
		t.Errorf("Accept called %d times, want %d", f.calls, pipeAcceptRetries+1)
	}
}

// fakePipe is a pipeServing that serves until its context ends.
type fakePipe struct{ closed chan struct{} }

func (p *fakePipe) Serve(ctx context.Context, _ Handler) error {
	<-ctx.Done()
	return nil
}

func (p *fakePipe) Close() error { close(p.closed); return nil }

// RunPipe reports the pipe unavailable, with why, while its name is taken,
// retries, reports it available once created, and unavailable again when
// the service stops; the channel's path is the pipe's name throughout.
func TestRunPipeRetriesAndReportsState(t *testing.T) {
	var mu sync.Mutex
	var states []State
	avail := make(chan struct{})
	srv := NewServer(Options{RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond, OnState: func(s State) {
		mu.Lock()
		states = append(states, s)
		mu.Unlock()
		if s.State == StateAvailable {
			close(avail)
		}
	}}, &pipeHandler{})
	attempts := 0
	pipe := &fakePipe{closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.runPipe(ctx, func(Options) (pipeServing, error) {
			attempts++
			if attempts < 3 {
				return nil, fmt.Errorf("adminsock: %s: %w", PipeName, ErrPipeInUse)
			}
			return pipe, nil
		})
	}()
	select {
	case <-avail:
	case <-time.After(5 * time.Second):
		t.Fatal("the pipe never became available")
	}
	if st := srv.State(); st.State != StateAvailable || st.Path != PipeName {
		t.Errorf("State = %+v, want available at %s", st, PipeName)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runPipe = %v, want nil", err)
	}
	select {
	case <-pipe.closed:
	default:
		t.Error("the pipe was not closed at shutdown")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 3 {
		t.Fatalf("states %+v, want unavailable, available, unavailable", states)
	}
	if s := states[0]; s.State != StateUnavailable || !strings.Contains(s.Reason, ErrPipeInUse.Error()) || s.Path != PipeName {
		t.Errorf("first state %+v, want unavailable because the name is taken", s)
	}
	if s := states[2]; s.State != StateUnavailable || s.Reason != "the service is stopping" {
		t.Errorf("last state %+v, want unavailable while stopping", s)
	}
}

// Where there is no pipe, RunPipe says so at once.
func TestRunPipeNotSupported(t *testing.T) {
	srv := NewServer(Options{}, &pipeHandler{})
	err := srv.runPipe(context.Background(), func(Options) (pipeServing, error) { return nil, ErrNotSupported })
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("runPipe = %v, want ErrNotSupported", err)
	}
	if st := srv.State(); st.State != StateUnavailable || st.Path != PipeName {
		t.Errorf("State = %+v", st)
	}
}

// The client's exchange refuses an empty or oversized answer.
func TestPipeExchangeLimits(t *testing.T) {
	for _, tc := range []struct {
		answer []byte
		ok     bool
	}{
		{[]byte(`{"outcome":"ok"}`), true},
		{nil, false},
		{[]byte(strings.Repeat("x", MaxAnswerBytes+1)), false},
	} {
		a, b := unixPair(t)
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := b.Read(buf); err != nil {
					break
				}
			}
			b.Write(tc.answer)
			b.Close()
		}()
		got, err := exchange(context.Background(), a, []byte(pauseReq))
		if (err == nil) != tc.ok || (tc.ok && string(got) != string(tc.answer)) {
			t.Errorf("answer of %d bytes: got %d bytes, %v", len(tc.answer), len(got), err)
		}
		a.Close()
	}
	if _, err := exchange(context.Background(), noHalfClose{}, nil); err == nil {
		t.Error("a connection that cannot half-close was accepted")
	}
}

type noHalfClose struct{ net.Conn }

func unixPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("over a Unix socket")
	}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "x.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}
