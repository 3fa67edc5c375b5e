//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// SPEC section 5, held work: borrowed work whose end the upstream will not
// confirm becomes held, listed in /status with its id, upstream and
// borrower until it ends or an administrator releases it. Here a ComfyUI
// that accepts /interrupt and queue deletes but stops nothing keeps a
// borrower's prompt running after the owner pauses lending.
func TestLendingHeldWorkListedAndReleased(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(20), fakeupstream.WithRefuseToStop())
	ld := startLending(t, lendingSetup{
		kind: "comfyui", target: fake.URL,
		lending:  "reclaim_grace = \"0s\"\nunload_timeout = \"1s\"",
		presence: "sources = []", // headless: lends at once
	})
	waitStatus(t, ld.Daemon, "a headless daemon to lend", lendable)

	// The borrower queues a prompt through the gate; the fake runs it and
	// holds it at its first sampler step.
	release := fake.Hold()
	t.Cleanup(release)
	body, _ := json.Marshal(map[string]any{
		"prompt":    fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "a lighthouse at dusk"),
		"client_id": "render-1",
	})
	r := gateInference(t, ld.gate, ld.borrow, "/prompt", string(body))
	var queued struct {
		PromptID string `json:"prompt_id"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &queued) != nil || queued.PromptID == "" {
		t.Fatalf("POST /prompt through the gate = %d: %s", r.Status, r.Body)
	}
	waitFor(t, "the prompt to run", func() bool { return fake.Running() == queued.PromptID })
	doc := engineStatus(t, ld.Daemon)
	if len(doc.State.Work) != 1 || doc.State.Work[0].JobID != queued.PromptID || doc.State.Work[0].State != "running" {
		t.Fatalf("/status work while the prompt runs = %+v, want the prompt tracked as a job", doc.State.Work)
	}

	// The owner pauses lending over loopback.
	if r := do(t, http.MethodPost, ld.API+"/admin/lending/disable", intent); r.Status != http.StatusOK {
		t.Fatalf("loopback pause = %d: %s", r.Status, r.Body)
	}
	doc = waitStatus(t, ld.Daemon, "the prompt to be held", func(doc engineDoc) bool {
		return len(doc.State.Work) == 1 && doc.State.Work[0].State == "held"
	})
	w := doc.State.Work[0]
	if w.ID == 0 || w.Upstream != ld.upstream || w.Borrower != borrowerName || w.Resource != lentResource || w.JobID != queued.PromptID || w.HeldSince == "" {
		t.Fatalf("held work = %+v, want id, upstream %q, borrower %q, job %s", w, ld.upstream, borrowerName, queued.PromptID)
	}
	doc = waitStatus(t, ld.Daemon, "the reclaim record", func(doc engineDoc) bool { return doc.gpu().LastReclaim != nil })
	if lr := doc.gpu().LastReclaim; lr.Reason != "lending_paused" || lr.Cancelled != 1 || lr.Held != 1 {
		t.Fatalf("last_reclaim = %+v, want lending_paused with 1 cancelled and 1 held", *lr)
	}
	// The reclaim asked the upstream to stop this prompt (and only it), and
	// the upstream did not.
	var asked bool
	for _, rec := range fake.RequestsTo("/interrupt") {
		var b struct {
			PromptID string `json:"prompt_id"`
		}
		if rec.JSON(&b) != nil || b.PromptID != queued.PromptID {
			t.Fatalf("an interrupt that does not name the borrower's prompt: %s", rec.Body)
		}
		asked = true
	}
	if !asked {
		t.Fatal("the reclaim never asked ComfyUI to interrupt the borrower's prompt")
	}
	if fake.Running() != queued.PromptID || len(fake.Interrupted()) != 0 {
		t.Fatalf("the fake stopped the prompt after all: running %q, interrupted %v", fake.Running(), fake.Interrupted())
	}
	if len(fake.RequestsTo("/free")) == 0 {
		t.Error("the reclaim never asked ComfyUI to free its models")
	}
	assertStatusSays(t, ld.Daemon, "not lent: lending_paused", fmt.Sprintf("held:     work %d on %s by %s since", w.ID, ld.upstream, borrowerName))
	if v := metricValue(t, ld.Daemon, "vacancyd_held_work"); v != 1 {
		t.Fatalf("vacancyd_held_work = %v, want 1", v)
	}
	// Held work stays held: it is still listed a job-poll later.
	if doc := engineStatus(t, ld.Daemon); len(doc.State.Work) != 1 || doc.State.Work[0].State != "held" {
		t.Fatalf("held work left the list while the upstream still runs it: %+v", doc.State.Work)
	}

	releasePath := fmt.Sprintf("%s/admin/work/%d/release", ld.API, w.ID)
	// Loopback trust may pause, not release work (Linux).
	if r := do(t, http.MethodPost, releasePath, intent); r.Status != http.StatusForbidden {
		t.Fatalf("loopback release = %d: %s, want 403", r.Status, r.Body)
	}
	if doc := engineStatus(t, ld.Daemon); len(doc.State.Work) != 1 {
		t.Fatalf("a refused release dropped the work: %+v", doc.State.Work)
	}
	// An administrator releases it.
	r = do(t, http.MethodPost, releasePath, intent, bearer(ld.admin))
	if r.Status != http.StatusOK {
		t.Fatalf("admin release = %d: %s", r.Status, r.Body)
	}
	if ans := adminAnswer(t, r); ans["released"] != true || ans["id"] != float64(w.ID) {
		t.Fatalf("release answer: %s", r.Body)
	}
	if doc := engineStatus(t, ld.Daemon); len(doc.State.Work) != 0 {
		t.Fatalf("released work still listed: %+v", doc.State.Work)
	}
	if v := metricValue(t, ld.Daemon, "vacancyd_held_work"); v != 0 {
		t.Fatalf("vacancyd_held_work = %v after the release, want 0", v)
	}
	if r := do(t, http.MethodPost, releasePath, intent, bearer(ld.admin)); r.Status != http.StatusNotFound {
		t.Fatalf("releasing it again = %d: %s, want 404", r.Status, r.Body)
	}
	if !slices.ContainsFunc(findLog(logLines(ld.Daemon), "work released", map[string]string{"upstream": ld.upstream, "borrower": borrowerName}), func(l logLine) bool {
		return l["id"] == float64(w.ID)
	}) {
		t.Error("the release is not in the daemon's log")
	}
}
