package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/vacancyd/vacancyd/internal/testutil/syncbuf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/presence/desktop/desktoptest"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// syncBuffer is a buffer a child process writes while the test reads it.
type syncBuffer = syncbuf.Buffer

// presenceCall is one report_presence the service received.
type presenceCall struct {
	account, source string
	idle            float64
	inhibited       bool
}

// presenceRecorder is the service's presence sink.
type presenceRecorder struct {
	mu    sync.Mutex
	calls []presenceCall
	more  chan struct{}
}

func (r *presenceRecorder) ReportPresence(account string, idle float64, source string, inhibited bool) {
	r.mu.Lock()
	r.calls = append(r.calls, presenceCall{account, source, idle, inhibited})
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

func (r *presenceRecorder) waitFor(t *testing.T, from int, what string, match func(presenceCall) bool, logs func() string) (presenceCall, int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		calls := append([]presenceCall(nil), r.calls...)
		r.mu.Unlock()
		for i := from; i < len(calls); i++ {
			if match(calls[i]) {
				return calls[i], i + 1
			}
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("no %s; reports: %+v\nreporter's log:\n%s", what, calls, logs())
		}
	}
}

// The real binary, in a desktop session whose bus carries GNOME Mutter's
// idle monitor and session manager, reports over a real admin socket: it
// waits for a service that is not there yet, then reports the idle time as
// the account the kernel names (another account than the service's, when
// the test runs as root), the session's idle inhibition, and the user's
// return as soon as Mutter signals it; it stops cleanly on SIGTERM.
func TestSessionReporterEndToEnd(t *testing.T) {
	addr := desktoptest.StartBus(t)
	mutter := desktoptest.ServeMutter(t, addr, 120_000)
	inhibit := desktoptest.NewValue[uint32](0)
	desktoptest.ServeGnomeSession(t, addr, inhibit)

	// A directory every account may enter, for the binary and the socket.
	dir, err := os.MkdirTemp("", "vacancyd-reporter-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "vacancyd")
	b, err := os.ReadFile(proc.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "admin.sock")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--log-level", "debug", "session-reporter", "--socket", sock, "--interval", "200ms")
	// The session's environment: its bus, no X display; the system bus is
	// the private one too, so nothing reaches the machine's logind.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DBUS_SESSION_BUS_ADDRESS=" + addr, "DBUS_SYSTEM_BUS_ADDRESS=" + addr}
	account := fmt.Sprintf("uid:%d", os.Getuid())
	if os.Geteuid() == 0 {
		const nobody = 65534
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		account = fmt.Sprintf("uid:%d", nobody)
	}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// The service starts only once the reporter has found it missing.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), "cannot report to the service") {
		if time.Now().After(deadline) {
			t.Fatalf("the reporter never tried the missing socket:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec := &presenceRecorder{more: make(chan struct{}, 1)}
	srv := adminsock.NewServer(adminsock.Options{Path: sock, RetryMin: 10 * time.Millisecond}, admin.Handlers{Presence: rec})
	srvDone := make(chan error, 1)
	sctx, stopSrv := context.WithCancel(ctx)
	go func() { srvDone <- srv.Run(sctx) }()
	defer func() { stopSrv(); <-srvDone }()

	c, next := rec.waitFor(t, 0, "a first report", func(presenceCall) bool { return true }, logs.String)
	if c.account != account || c.source != "mutter" || c.idle != 120 || c.inhibited {
		t.Fatalf("report %+v; want account %s, source mutter, 120 s idle, not inhibited", c, account)
	}
	inhibit.Set(8) // a video call inhibits idleness
	_, next = rec.waitFor(t, next, "an inhibited report", func(c presenceCall) bool { return c.inhibited }, logs.String)
	inhibit.Set(0)
	_, next = rec.waitFor(t, next, "inhibition ended", func(c presenceCall) bool { return !c.inhibited }, logs.String)

	// The user comes back: Mutter fires the watch the reporter armed.
	for {
		if waiting, _ := mutter.Armed(); waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no user-active watch armed:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mutter.Input(t, 30)
	rec.waitFor(t, next, "the user's return", func(c presenceCall) bool { return c.idle == 0.03 && c.account == account }, logs.String)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if code := cmd.ProcessState.ExitCode(); code != ExitOK {
			t.Fatalf("exit %d after SIGTERM:\n%s", code, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("the reporter did not stop on SIGTERM:\n%s", logs.String())
	}
}
