package comfyui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

var bearer = &config.Credential{Scheme: "bearer", Secret: config.NewSecret("comfy-tok")}

func upstreamOf(t *testing.T, target string, cred *config.Credential) adapter.Upstream {
	t.Helper()
	u, err := adapter.NewUpstream(config.Upstream{ID: "img", Kind: config.KindComfyUI, Target: target, Credential: cred}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start is a ComfyUI fake requiring the bearer credential, its Upstream,
// and a hold every prompt waits on (after its first sampler step) until
// the test releases it.
func start(t *testing.T) (*fakeupstream.ComfyUI, adapter.Upstream, func()) {
	f := fakeupstream.StartComfyUI(t, fakeupstream.WithBearer("comfy-tok"), fakeupstream.WithTokens(3))
	release := f.Hold()
	t.Cleanup(release)
	return f, upstreamOf(t, f.URL, bearer), release
}

// submit queues a prompt the way a client does (the owner directly, a
// borrower through the gate: both reach ComfyUI with the credential).
func submit(t *testing.T, f *fakeupstream.ComfyUI, clientID, text string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"prompt": fakeupstream.ComfyTxt2Img("sd_xl_base_1.0.safetensors", text), "client_id": clientID})
	req, _ := http.NewRequest("POST", f.URL+"/prompt", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer comfy-tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var out struct {
		PromptID string `json:"prompt_id"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&out) != nil || out.PromptID == "" {
		t.Fatalf("submit: %d", res.StatusCode)
	}
	return out.PromptID
}

// running waits until the fake runs id.
func running(t *testing.T, f *fakeupstream.ComfyUI, id string) {
	t.Helper()
	ctx := waitCtx(t)
	if err := adapter.Poll(ctx, func() (bool, error) { return f.Running() == id, nil }); err != nil {
		t.Fatalf("%s never ran (running %q)", id, f.Running())
	}
}

func promptIDs(t *testing.T, recs []fakeupstream.Recorded, key string) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		var body map[string]any
		if err := r.JSON(&body); err != nil {
			t.Fatalf("%s body %q: %v", r.Path, r.Body, err)
		}
		switch v := body[key].(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				s, _ := x.(string)
				out = append(out, s)
			}
		}
	}
	return out
}

// TestCancelRunningPromptInterruptsOnlyIt: the borrower's running prompt
// is interrupted by id and confirmed gone; the owner's queued prompt is
// neither deleted nor interrupted and runs to success afterwards.
func TestCancelRunningPromptInterruptsOnlyIt(t *testing.T) {
	f, u, release := start(t)
	r := Reclaimer{}
	borrowed := submit(t, f, "vacancyd-borrower", "borrowed")
	running(t, f, borrowed)
	owner := submit(t, f, "owner", "owner's")
	if done, err := r.JobDone(waitCtx(t), u, borrowed); err != nil || done {
		t.Fatalf("JobDone of a running prompt = %v, %v", done, err)
	}

	stopped, err := r.CancelJob(waitCtx(t), u, borrowed)
	if err != nil || !stopped {
		t.Fatalf("CancelJob = %v, %v", stopped, err)
	}
	if got := f.Interrupted(); !slices.Equal(got, []string{borrowed}) {
		t.Fatalf("interrupted %v", got)
	}
	if got := promptIDs(t, f.RequestsTo("/interrupt"), "prompt_id"); !slices.Equal(got, []string{borrowed}) {
		t.Errorf("interrupt requests name %v", got)
	}
	if got := f.RequestsTo("/queue"); slices.ContainsFunc(got, func(r fakeupstream.Recorded) bool { return r.Method == "POST" }) {
		t.Errorf("queue changed: %v", promptIDs(t, got, "delete"))
	}
	if done, err := r.JobDone(waitCtx(t), u, borrowed); err != nil || !done {
		t.Fatalf("JobDone after cancel = %v, %v", done, err)
	}

	running(t, f, owner)
	release()
	if ok, err := f.WaitDone(waitCtx(t), owner); err != nil || !ok {
		t.Fatalf("owner's prompt: ok=%v %v", ok, err)
	}
	if got := f.Interrupted(); !slices.Equal(got, []string{borrowed}) {
		t.Fatalf("interrupted %v", got)
	}
}

// TestCancelPendingPromptDeletesIt: a borrower's queued prompt is deleted
// from the queue by id; the owner's running prompt is not interrupted.
func TestCancelPendingPromptDeletesIt(t *testing.T) {
	f, u, release := start(t)
	r := Reclaimer{}
	owner := submit(t, f, "owner", "owner's")
	running(t, f, owner)
	borrowed := submit(t, f, "vacancyd-borrower", "borrowed")
	if !slices.Contains(f.Pending(), borrowed) {
		t.Fatalf("pending %v", f.Pending())
	}

	stopped, err := r.CancelJob(waitCtx(t), u, borrowed)
	if err != nil || !stopped {
		t.Fatalf("CancelJob = %v, %v", stopped, err)
	}
	if slices.Contains(f.Pending(), borrowed) || f.Running() != owner {
		t.Fatalf("pending %v, running %q", f.Pending(), f.Running())
	}
	if len(f.Interrupted()) != 0 || len(f.RequestsTo("/interrupt")) != 0 {
		t.Fatalf("interrupted %v", f.Interrupted())
	}
	var deletes []fakeupstream.Recorded
	for _, rec := range f.RequestsTo("/queue") {
		if rec.Method == "POST" {
			deletes = append(deletes, rec)
		}
	}
	if got := promptIDs(t, deletes, "delete"); len(got) == 0 || slices.ContainsFunc(got, func(id string) bool { return id != borrowed }) {
		t.Fatalf("deleted %v", got)
	}
	if done, err := r.JobDone(waitCtx(t), u, borrowed); err != nil || !done {
		t.Fatalf("JobDone of a deleted prompt = %v, %v", done, err)
	}
	if done, err := r.JobDone(waitCtx(t), u, owner); err != nil || done {
		t.Fatalf("JobDone of the owner's running prompt = %v, %v", done, err)
	}
	release()
	if ok, err := f.WaitDone(waitCtx(t), owner); err != nil || !ok {
		t.Fatalf("owner's prompt: ok=%v %v", ok, err)
	}
}

// TestJobDoneAfterCompletion: a prompt that ran to its end is done (its
// history entry); cancelling it, or an id ComfyUI never had, sends no
// delete and no interrupt.
func TestJobDoneAfterCompletion(t *testing.T) {
	f, u, release := start(t)
	release()
	r := Reclaimer{}
	id := submit(t, f, "vacancyd-borrower", "done")
	if ok, err := f.WaitDone(waitCtx(t), id); err != nil || !ok {
		t.Fatalf("prompt: ok=%v %v", ok, err)
	}
	if done, err := r.JobDone(waitCtx(t), u, id); err != nil || !done {
		t.Fatalf("JobDone = %v, %v", done, err)
	}
	for _, jobID := range []string{id, "00000000-0000-4000-8000-000000000000"} {
		if stopped, err := r.CancelJob(waitCtx(t), u, jobID); err != nil || !stopped {
			t.Fatalf("CancelJob(%s) = %v, %v", jobID, stopped, err)
		}
	}
	if n := len(f.RequestsTo("/interrupt")); n != 0 || slices.ContainsFunc(f.RequestsTo("/queue"), func(r fakeupstream.Recorded) bool { return r.Method == "POST" }) {
		t.Fatalf("cancelling finished work changed the queue (%d interrupts)", n)
	}
	if _, err := r.JobDone(waitCtx(t), u, ""); err == nil {
		t.Fatal("JobDone of an empty id")
	}
}

// TestPromptThatRefusesToStopIsNotConfirmed: when ComfyUI accepts the
// interrupt but the prompt keeps running, CancelJob reports it not stopped
// (without error) once its context ends, JobDone keeps saying not done,
// and the prompt is done once it does end. The fake has no option for a
// prompt that ignores /interrupt, so a proxy in front of it swallows them.
func TestPromptThatRefusesToStopIsNotConfirmed(t *testing.T) {
	f, _, release := start(t)
	target, _ := url.Parse(f.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var swallowed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && (r.URL.Path == "/interrupt" || r.URL.Path == "/api/interrupt") {
			if r.Header.Get("Authorization") != "Bearer comfy-tok" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			var body struct {
				PromptID string `json:"prompt_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			swallowed = append(swallowed, body.PromptID)
			mu.Unlock()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u := upstreamOf(t, srv.URL, bearer)
	r := Reclaimer{}

	borrowed := submit(t, f, "vacancyd-borrower", "stubborn")
	running(t, f, borrowed)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	stopped, err := r.CancelJob(ctx, u, borrowed)
	if stopped || err != nil {
		t.Fatalf("CancelJob = %v, %v", stopped, err)
	}
	mu.Lock()
	got := slices.Clone(swallowed)
	mu.Unlock()
	if !slices.Equal(got, []string{borrowed}) || f.Running() != borrowed {
		t.Fatalf("interrupts %v, running %q", got, f.Running())
	}
	if done, err := r.JobDone(waitCtx(t), u, borrowed); err != nil || done {
		t.Fatalf("JobDone of a held prompt = %v, %v", done, err)
	}
	release()
	if err := adapter.Poll(waitCtx(t), func() (bool, error) { return r.JobDone(waitCtx(t), u, borrowed) }); err != nil {
		t.Fatalf("the prompt ended but JobDone never said so: %v", err)
	}
}

// TestCancelWithoutTheCredentialFails: an upstream that refuses vacancyd's
// calls is an error, never a confirmed stop.
func TestCancelWithoutTheCredentialFails(t *testing.T) {
	f, _, _ := start(t)
	borrowed := submit(t, f, "vacancyd-borrower", "x")
	running(t, f, borrowed)
	u := upstreamOf(t, f.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	stopped, err := Reclaimer{}.CancelJob(ctx, u, borrowed)
	if stopped || adapter.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("CancelJob = %v, %v", stopped, err)
	}
	if _, err := (Reclaimer{}).JobDone(waitCtx(t), u, borrowed); adapter.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("JobDone: %v", err)
	}
	if len(f.Interrupted()) != 0 {
		t.Fatalf("interrupted %v", f.Interrupted())
	}
}

// TestUnloadFreesModelsAndMemory: Unload is POST /free with both flags,
// carrying the credential; Loaded is unsupported.
func TestUnloadFreesModelsAndMemory(t *testing.T) {
	f := fakeupstream.StartComfyUI(t, fakeupstream.WithBasicAuth("owner", "pw"))
	u := upstreamOf(t, f.URL, &config.Credential{Scheme: "basic", Username: "owner", Secret: config.NewSecret("pw")})
	r := Reclaimer{}
	if err := r.Unload(waitCtx(t), u, nil); err != nil {
		t.Fatal(err)
	}
	frees := f.RequestsTo("/free")
	if len(frees) != 1 || frees[0].Status != 200 || frees[0].Header.Get("Authorization") != u.Authorization.Reveal() {
		t.Fatalf("free requests %+v", frees)
	}
	var body map[string]any
	if err := frees[0].JSON(&body); err != nil || body["unload_models"] != true || body["free_memory"] != true {
		t.Fatalf("free body %s", frees[0].Body)
	}
	if err := r.Unload(waitCtx(t), upstreamOf(t, f.URL, nil), nil); adapter.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("without the credential: %v", err)
	}
	if _, err := r.Loaded(waitCtx(t), u); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Loaded: %v", err)
	}
}
