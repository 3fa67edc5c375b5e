package desktoptest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// StartXvfb runs a virtual X server for the test and returns its display
// (":N").
func StartXvfb(t testing.TB) string {
	t.Helper()
	xvfb := NeedTool(t, "Xvfb", "xvfb")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(xvfb, "-displayfd", "3", "-nolisten", "tcp", "-screen", "0", "320x240x24")
	cmd.ExtraFiles = []*os.File{w}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			t.Fatalf("Xvfb did not start: %s", stderr.String())
		}
		return ":" + n
	case <-time.After(hang):
		t.Fatalf("Xvfb did not start within %v: %s", hang, stderr.String())
	}
	return ""
}

// MovePointer is the user moving the mouse, through XTEST (input the X
// server treats as real: it resets the idle time).
func MovePointer(t testing.TB, display string, x, y int16) {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := xtest.Init(c); err != nil {
		t.Fatal(err)
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	if err := xtest.FakeInputChecked(c, xproto.MotionNotify, 0, 0, root, x, y, 0).Check(); err != nil {
		t.Fatal(err)
	}
	// A round trip: the server has handled the motion once it answers.
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		t.Fatal(err)
	}
}
