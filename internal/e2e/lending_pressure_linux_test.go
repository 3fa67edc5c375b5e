//go:build linux

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// writeAtomically replaces path's content as a well-behaved writer does:
// a temporary file renamed over it.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func readyz(t *testing.T, ld *lendingDaemon) int {
	t.Helper()
	return do(t, http.MethodGet, ld.API+"/readyz").Status
}

// SPEC section 5, GPU pressure from the state file any tool can write
// (presence.gpu_pressure_file, relative to the config directory): pressure
// stops lending and reclaims borrowed work with gpu_pressure, /status says
// why; a malformed file fails closed (still gpu_pressure) and makes the
// daemon not ready; removing the file lends again.
func TestLendingGPUPressureFile(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(50))
	ld := startLending(t, lendingSetup{
		kind: "ollama", target: fake.URL,
		lending:  "reclaim_grace = \"300ms\"\nunload_timeout = \"5s\"",
		presence: "sources = []\ngpu_pressure_file = \"pressure.json\"",
	})
	state := filepath.Join(ld.Dir, "pressure.json")

	// No file: nothing claims pressure.
	waitStatus(t, ld.Daemon, "lending with no state file", lendable)
	if code := readyz(t, ld); code != http.StatusOK {
		t.Fatalf("/readyz = %d with no state file", code)
	}
	if in, ok := engineStatus(t, ld.Daemon).input("pressure-file"); !ok || !in.Ready {
		t.Fatalf("pressure-file input = %+v (listed %v), want ready", in, ok)
	}

	// A borrower is streaming when the owner's renderer claims the GPU.
	release := fake.Hold()
	t.Cleanup(release)
	s := heldStream(t, ollamaBorrower(t, ld.gate, ld.borrow))
	writeAtomically(t, state, `{"pressure": true, "reason": "rendering"}`)
	doc := waitStatus(t, ld.Daemon, "gpu_pressure from the state file", notLendingFor("gpu_pressure"))
	if p := doc.gpu().Pressure; !p.Active || !slices.ContainsFunc(p.Reasons, func(r string) bool { return strings.Contains(r, "rendering") }) {
		t.Fatalf("/status pressure = %+v, want the file's reason", p)
	}
	assertOllamaNotLending(t, ld.gate, ld.borrow, "gpu_pressure")
	assertStatusSays(t, ld.Daemon, "not lent: gpu_pressure (pressure-file: state file: rendering)")
	assertReclaimed(t, ld.Daemon, fake, s, "gpu_pressure")
	if code := readyz(t, ld); code != http.StatusOK {
		t.Fatalf("/readyz = %d under valid pressure; pressure is not a readiness failure", code)
	}

	// A malformed file fails closed and the daemon is not ready.
	writeAtomically(t, state, `{"pressure": tru`)
	waitFor(t, "/readyz 503 on a malformed state file", func() bool { return readyz(t, ld) == http.StatusServiceUnavailable })
	doc = engineStatus(t, ld.Daemon)
	if g := doc.gpu(); g.Lendable || g.Reason != "gpu_pressure" {
		t.Fatalf("malformed state file: %+v, want gpu_pressure", g)
	}
	if doc.State.Ready || !slices.ContainsFunc(doc.State.NotReady, func(s string) bool { return strings.HasPrefix(s, "pressure-file: ") }) {
		t.Fatalf("state.ready %v, not_ready %v: want the state file named", doc.State.Ready, doc.State.NotReady)
	}
	if in, ok := doc.input("pressure-file"); !ok || in.Ready || !strings.Contains(in.Reason, "malformed") {
		t.Fatalf("pressure-file input = %+v, want not ready: malformed", in)
	}
	assertOllamaNotLending(t, ld.gate, ld.borrow, "gpu_pressure")
	assertStatusSays(t, ld.Daemon, "input:    pressure-file NOT READY: malformed", "ready:    NO: pressure-file: malformed")

	// The file goes away: lending and readiness come back.
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ld.Daemon, "lending after the state file is removed", lendable)
	waitFor(t, "/readyz 200 after the state file is removed", func() bool { return readyz(t, ld) == http.StatusOK })
	release()
	if err := chatOnce(t, ollamaBorrower(t, ld.gate, ld.borrow)); err != nil {
		t.Fatalf("chat after the pressure ended: %v", err)
	}
}
