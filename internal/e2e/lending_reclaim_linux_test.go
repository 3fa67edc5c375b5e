//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/presence"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// SPEC section 5, reclaim: when the owner comes back, new inference is
// refused at once (503 + Retry-After), in-flight borrowed work runs for
// reclaim_grace and is then cancelled (the upstream request closed), the
// borrowed models are unloaded, and lending returns only once the owner has
// been idle for idle_after again. These tests drive it with the real
// inputs: a session report over the admin socket, and an input_event record
// in a watched device node.

// checkHysteresis fails when a /status document says lendable although the
// owner's last input, as that same decision saw it, is less than idleAfter
// old. The engine computes the verdict and idle_seconds in one step, so
// this holds however late the document is read.
func checkHysteresis(t *testing.T, doc engineDoc, idleAfter time.Duration) {
	t.Helper()
	if doc.gpu().Lendable && doc.State.Presence.IdleSeconds < idleAfter.Seconds() {
		t.Fatalf("lendable with the owner idle for only %.3fs (idle_after %s)", doc.State.Presence.IdleSeconds, idleAfter)
	}
	if !doc.gpu().Lendable && doc.gpu().Reason == "owner_present" && !doc.State.Presence.Present {
		t.Fatalf("owner_present while presence.present is false: %+v", doc.State.Presence)
	}
}

// waitLendableAfterIdle polls /status until the resource is lendable,
// checking the hysteresis on every document read on the way, and reports
// whether one of them held lending for owner_present.
func waitLendableAfterIdle(t *testing.T, ld *lendingDaemon, idleAfter time.Duration) (sawPresent bool) {
	t.Helper()
	waitStatus(t, ld.Daemon, "lending to resume after idle_after", func(doc engineDoc) bool {
		checkHysteresis(t, doc, idleAfter)
		if !doc.gpu().Lendable && doc.gpu().Reason == "owner_present" {
			sawPresent = true
		}
		return doc.gpu().Lendable
	})
	return sawPresent
}

// A borrower streams a chat through an Ollama gate with Ollama's own Go
// client; the session reporter's report of fresh input (a real
// report_presence over the admin socket, sent by vacancyd admin-request)
// cuts the stream, refuses new requests with owner_present, unloads the
// borrowed model and records the reclaim. Idle reports bring lending back,
// but only once the reported idle time reaches idle_after.
func TestLendingReclaimBySessionReport(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(50))
	const idleAfter = 10 * time.Second
	ld := startLending(t, lendingSetup{
		kind: "ollama", target: fake.URL,
		lending:  fmt.Sprintf("idle_after = %q\nreclaim_grace = \"300ms\"\nunload_timeout = \"5s\"", idleAfter),
		presence: `sources = ["session"]`,
	})
	c := ollamaBorrower(t, ld.gate, ld.borrow)

	// No report yet: presence is unknown, which holds lending.
	if g := engineStatus(t, ld.Daemon).gpu(); g.Lendable || g.Reason != "presence_unknown" {
		t.Fatalf("before any report: %+v, want presence_unknown", g)
	}
	assertOllamaNotLending(t, ld.gate, ld.borrow, "presence_unknown")

	reportPresence(t, ld.sock, 3600)
	doc := waitStatus(t, ld.Daemon, "lending to start on an idle report", lendable)
	if p := doc.State.Presence; !p.Known || p.Present || !slices.Contains(p.Live, "session:uid:"+fmt.Sprint(os.Geteuid())+"/x11") {
		t.Fatalf("presence after an idle report: %+v", p)
	}

	release := fake.Hold()
	t.Cleanup(release)
	done := heldStream(t, c)
	assertBorrowing(t, ld.Daemon, ld.upstream, borrowerName)
	if got := loadedNames(fake); !slices.Contains(got, borrowedModel+":latest") {
		t.Fatalf("the fake does not hold the borrowed model: %v", got)
	}
	if n := len(unloadCalls(fake, borrowedModel)); n != 0 {
		t.Fatalf("%d unload calls before any reclaim", n)
	}

	// The owner is back: the reporter says the last input was just now.
	reportPresence(t, ld.sock, 0)
	waitStatus(t, ld.Daemon, "owner_present after the report", notLendingFor("owner_present"))
	assertOllamaNotLending(t, ld.gate, ld.borrow, "owner_present")
	assertStatusSays(t, ld.Daemon, "resource: gpu0 switched on, not lent: owner_present", "owner:    present, last input")
	assertReclaimed(t, ld.Daemon, fake, done, "owner_present")

	// Reports of a long idle bring lending back, and borrowing works again.
	release()
	reportPresence(t, ld.sock, 3600)
	waitStatus(t, ld.Daemon, "lending to resume on an idle report", lendable)
	assertStatusSays(t, ld.Daemon, "resource: gpu0 switched on, LENT", "owner:    away, idle 1h0m")
	if err := chatOnce(t, c); err != nil {
		t.Fatalf("chat after lending resumed: %v", err)
	}

	// Hysteresis: a report of input idleAfter-3s ago holds lending for the
	// rest of idle_after, then lending comes back with no further report.
	reportPresence(t, ld.sock, (idleAfter - 3*time.Second).Seconds())
	if !waitLendableAfterIdle(t, ld, idleAfter) {
		t.Fatal("a report of input less than idle_after ago never held lending (owner_present)")
	}
}

// fakeInputDevice is a named pipe standing in for /dev/input/eventN. Its
// writing end is opened read-write before the daemon starts watching, so
// neither side's open blocks and the pipe stays open while the daemon
// reads it.
func fakeInputDevice(t *testing.T) (glob string, w *os.File) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "event0")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return filepath.Join(dir, "event*"), w
}

// The same reclaim driven by the service-side evdev watcher: one key press
// (an EV_KEY record and its EV_SYN, as the kernel delivers them) written
// into the watched device node.
func TestLendingReclaimByInputDeviceRecord(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(50))
	glob, dev := fakeInputDevice(t)
	const idleAfter = 4 * time.Second
	ld := startLending(t, lendingSetup{
		kind: "ollama", target: fake.URL,
		lending:  fmt.Sprintf("idle_after = %q\nreclaim_grace = \"300ms\"\nunload_timeout = \"5s\"", idleAfter),
		presence: fmt.Sprintf("sources = [\"input-devices\"]\ninput_devices = %q", glob),
	})
	c := ollamaBorrower(t, ld.gate, ld.borrow)

	// The watcher counts its own start as input: lending begins only once
	// idle_after has passed with no input.
	if !waitLendableAfterIdle(t, ld, idleAfter) {
		t.Fatal("lending started without the watcher's start counting as input (never owner_present)")
	}
	doc := engineStatus(t, ld.Daemon)
	if in, ok := doc.input("input-devices"); !ok || !in.Ready || !slices.Contains(doc.State.Presence.Live, "input-devices") {
		t.Fatalf("input-devices is not a ready, live input: %+v %+v", doc.State.Inputs, doc.State.Presence)
	}

	release := fake.Hold()
	t.Cleanup(release)
	done := heldStream(t, c)
	assertBorrowing(t, ld.Daemon, ld.upstream, borrowerName)

	// The owner presses a key.
	now := time.Now()
	var rec []byte
	rec = presence.NewInputEvent(now, presence.EvKey, 30, 1).Append(rec) // KEY_A down
	rec = presence.NewInputEvent(now, presence.EvSyn, 0, 0).Append(rec)  // SYN_REPORT
	if _, err := dev.Write(rec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ld.Daemon, "owner_present after the key press", notLendingFor("owner_present"))
	assertOllamaNotLending(t, ld.gate, ld.borrow, "owner_present")
	assertReclaimed(t, ld.Daemon, fake, done, "owner_present")

	// With no more input, lending returns once idle_after has passed.
	release()
	waitLendableAfterIdle(t, ld, idleAfter)
	if err := chatOnce(t, c); err != nil {
		t.Fatalf("chat after lending resumed: %v", err)
	}
}
