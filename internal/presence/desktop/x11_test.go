package desktop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/presence/desktop/desktoptest"
)

// Against a real X server: MIT-SCREEN-SAVER's idle time grows while nobody
// touches it and drops when the pointer moves.
func TestX11Source(t *testing.T) {
	display := desktoptest.StartXvfb(t)
	src := open(t, X11(display, false))
	desktoptest.MovePointer(t, display, 10, 10)
	first := idle(t, src)
	// Wait (without asserting time) until the server counts some idleness.
	deadline := time.Now().Add(hang)
	var later time.Duration
	for later = idle(t, src); later <= first+200*time.Millisecond; later = idle(t, src) {
		if time.Now().After(deadline) {
			t.Fatalf("idle time stuck at %v", later)
		}
		time.Sleep(20 * time.Millisecond)
	}
	desktoptest.MovePointer(t, display, 100, 100)
	if after := idle(t, src); after >= later {
		t.Fatalf("idle %v after the pointer moved, %v before", after, later)
	}
}

// No display, or a Wayland session, is no X11 source.
func TestX11Refuses(t *testing.T) {
	if _, err := X11("", false).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "DISPLAY") {
		t.Fatalf("no display: %v", err)
	}
	if _, err := X11(":0", true).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "Wayland") {
		t.Fatalf("wayland: %v", err)
	}
}
