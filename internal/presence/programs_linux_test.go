package presence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// startProgram runs a copy of sleep under name and returns it running.
func startProgram(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("needs sleep (coreutils)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// A listed program is found while it runs, by its comm, and a name longer
// than the kernel's 15-byte comm is found whole through its executable;
// unlisted programs are not.
func TestProgramsScanFindsRunningPrograms(t *testing.T) {
	short := uniqueName(t, "vdp-")                           // 12 bytes: the comm is the name
	long := uniqueName(t, "vacancyd-presence-long-program-") // the comm is cut to 15 bytes
	startProgram(t, short)
	startProgram(t, long)
	p := &Programs{Names: []string{long, short, uniqueName(t, "vdp-absent-")}}
	found, err := p.Scan()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{long, short}
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Fatalf("found %v, want %v", found, want)
	}
	// The cut comm alone is not taken for another name that shares it.
	other := long[:15] + "-other"
	if found, _ := (&Programs{Names: []string{other}}).Scan(); len(found) != 0 {
		t.Fatalf("found %v for a name that only shares the 15-byte prefix", found)
	}
}

// While a listed program runs the owner is present (inhibited, with an
// expiry two intervals on); when it ends the source reports plain absence.
func TestProgramsReportInhibitionWhileRunning(t *testing.T) {
	name := uniqueName(t, "vdp-")
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	p := &Programs{Names: []string{name}, Interval: 20 * time.Millisecond}
	go func() { done <- p.Run(ctx, sink) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	_, next := sink.waitFor(t, 0, "ready", isReady(SourcePrograms, true))
	c, next := sink.waitFor(t, next, "a first report", isActivity(SourcePrograms))
	if c.activity.Inhibited {
		t.Fatalf("inhibited before the program started: %v", c)
	}

	before := time.Now()
	cmd := startProgram(t, name)
	c, next = sink.waitFor(t, next, "inhibition while the program runs", func(c call) bool {
		return c.kind == "activity" && c.source == SourcePrograms && c.activity.Inhibited
	})
	if !c.activity.Until.After(before) || c.activity.Until.After(time.Now().Add(2*p.Interval)) {
		t.Fatalf("until %v should be two intervals after the scan", c.activity.Until)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	sink.waitFor(t, next, "absence once the program ended", func(c call) bool {
		return c.kind == "activity" && c.source == SourcePrograms && !c.activity.Inhibited && c.activity.Until.IsZero()
	})
}

// Without a readable proc file system the source is not ready and says why.
func TestProgramsNotReadyWithoutProc(t *testing.T) {
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	missing := filepath.Join(t.TempDir(), "proc")
	go func() { done <- (&Programs{Names: []string{"x"}, ProcDir: missing}).Run(ctx, sink) }()
	c, _ := sink.waitFor(t, 0, "not ready", isReady(SourcePrograms, false))
	cancel()
	<-done
	if !strings.Contains(c.reason, missing) {
		t.Fatalf("reason %q should name %s", c.reason, missing)
	}
}
