//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"

	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// The lending tests run the real daemon in front of the shared fake
// upstreams and drive its lending engine through its real inputs: session
// reports over the admin socket (vacancyd admin-request), input_event
// records written into a watched named pipe, the GPU-pressure state file
// and the owner's switches. Nothing asserts a duration: every wait is
// bounded by patience only so that a broken daemon fails instead of
// hanging.

// engineDoc is the part of /status the lending tests read.
type engineDoc struct {
	Lending struct {
		Enabled bool `json:"lending_enabled"`
	} `json:"lending"`
	State struct {
		Presence struct {
			Known       bool     `json:"known"`
			Present     bool     `json:"present"`
			IdleSeconds float64  `json:"idle_seconds"`
			Live        []string `json:"live"`
		} `json:"presence"`
		Inputs    []inputDoc             `json:"inputs"`
		Resources map[string]resourceDoc `json:"resources"`
		Work      []workDoc              `json:"work"`
		Ready     bool                   `json:"ready"`
		NotReady  []string               `json:"not_ready"`
	} `json:"state"`
}

type inputDoc struct {
	Name   string `json:"name"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
}

// input returns the named input from /status.
func (doc engineDoc) input(name string) (inputDoc, bool) {
	for _, in := range doc.State.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return inputDoc{}, false
}

type resourceDoc struct {
	Lendable bool   `json:"lendable"`
	Reason   string `json:"reason"`
	Enabled  bool   `json:"enabled"`
	Pressure struct {
		Active  bool     `json:"active"`
		Reasons []string `json:"reasons"`
	} `json:"pressure"`
	Reclaiming  bool        `json:"reclaiming"`
	LastReclaim *reclaimDoc `json:"last_reclaim"`
}

type reclaimDoc struct {
	Reason            string   `json:"reason"`
	At                string   `json:"at"`
	AdmissionsClosedS *float64 `json:"admissions_closed_s"`
	WorkEndedS        *float64 `json:"work_ended_s"`
	UnloadedS         *float64 `json:"unloaded_s"`
	Cancelled         int      `json:"cancelled"`
	Held              int      `json:"held"`
	UnloadErrors      []string `json:"unload_errors"`
}

type workDoc struct {
	ID        uint64 `json:"id"`
	Upstream  string `json:"upstream"`
	Resource  string `json:"resource"`
	Borrower  string `json:"borrower"`
	Model     string `json:"model"`
	JobID     string `json:"job_id"`
	Started   string `json:"started"`
	State     string `json:"state"`
	HeldSince string `json:"held_since"`
}

// engineStatus reads /status over loopback (a trusted read).
func engineStatus(t *testing.T, d *proc.Daemon) engineDoc {
	t.Helper()
	r := do(t, http.MethodGet, d.API+"/status")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /status = %d: %s", r.Status, r.Body)
	}
	var doc engineDoc
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("/status is not JSON: %v: %s", err, r.Body)
	}
	if _, ok := doc.State.Resources[lentResource]; !ok {
		t.Fatalf("/status has no state.resources.%s: %s", lentResource, r.Body)
	}
	return doc
}

// lentResource is the one resource every lending test lends (the default).
const lentResource = "gpu0"

func (doc engineDoc) gpu() resourceDoc { return doc.State.Resources[lentResource] }

// waitStatus polls /status until cond holds and returns that document.
func waitStatus(t *testing.T, d *proc.Daemon, what string, cond func(engineDoc) bool) engineDoc {
	t.Helper()
	var doc engineDoc
	waitFor(t, what, func() bool {
		doc = engineStatus(t, d)
		return cond(doc)
	})
	return doc
}

func lendable(doc engineDoc) bool { return doc.gpu().Lendable }

func notLendingFor(reason string) func(engineDoc) bool {
	return func(doc engineDoc) bool { return !doc.gpu().Lendable && doc.gpu().Reason == reason }
}

// reportPresence sends one report_presence over the daemon's admin socket
// with vacancyd admin-request, as the session reporter does.
func reportPresence(t *testing.T, sock string, idleSeconds float64) {
	t.Helper()
	req := fmt.Sprintf(`{"protocol_version":1,"action":{"kind":"report_presence","idle_seconds":%s,"source":"x11","inhibited":false}}`,
		strconv.FormatFloat(idleSeconds, 'f', -1, 64))
	f := filepath.Join(t.TempDir(), "presence.json")
	if err := os.WriteFile(f, []byte(req), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runBinary(t, "admin-request", "--socket", sock, "--request", f)
	if code != 0 {
		t.Fatalf("report_presence (idle %gs): exit %d: %s", idleSeconds, code, out)
	}
	var ans struct {
		Outcome  string `json:"outcome"`
		Accepted bool   `json:"accepted"`
	}
	if err := json.Unmarshal([]byte(out), &ans); err != nil || ans.Outcome != "presence" || !ans.Accepted {
		t.Fatalf("report_presence answer: %v: %s", err, out)
	}
}

// waitSocket waits until the daemon's admin socket exists.
func waitSocket(t *testing.T, sock string) {
	t.Helper()
	waitFor(t, "the admin socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
}

// borrowerHTTP is an HTTP client that presents token as a bearer token.
func borrowerHTTP(token string) *http.Client {
	return &http.Client{Transport: bearerRT{token: token, base: &http.Transport{Proxy: nil}}}
}

type bearerRT struct {
	token string
	base  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// ollamaBorrower is Ollama's own Go client pointed at a gate.
func ollamaBorrower(t *testing.T, gate, token string) *ollama.Client {
	t.Helper()
	u, err := url.Parse("http://" + gate)
	if err != nil {
		t.Fatal(err)
	}
	return ollama.NewClient(u, borrowerHTTP(token))
}

// borrowedModel is the model the borrower chats with; the fake lists it as
// "llama3.2:latest".
const borrowedModel = "llama3.2"

// heldStream starts a streamed chat that the fake holds open after its first
// chunk (the caller has called fake.Hold). It returns once the first chunk
// arrived.
func heldStream(t *testing.T, c *ollama.Client) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
	t.Cleanup(cancel)
	first := make(chan struct{})
	s := &stream{done: make(chan error, 1)}
	go func() {
		n := 0
		s.done <- c.Chat(ctx, &ollama.ChatRequest{
			Model:     borrowedModel,
			Messages:  []ollama.Message{{Role: "user", Content: "Tell me a long story"}},
			KeepAlive: &ollama.Duration{Duration: 10 * time.Minute},
		}, func(r ollama.ChatResponse) error {
			if r.Done {
				s.completed.Store(true)
			}
			if n++; n == 1 {
				close(first)
			}
			return nil
		})
	}()
	select {
	case <-first:
	case err := <-s.done:
		t.Fatalf("the borrowed chat ended before its first chunk: %v", err)
	case <-time.After(patience):
		t.Fatal("no first chunk of the borrowed chat")
	}
	return s
}

// stream is a borrower's streamed chat in flight.
type stream struct {
	// done receives Chat's result when the stream ends.
	done chan error
	// completed is set if the stream's final (done) chunk arrived.
	completed atomic.Bool
}

// chatOnce sends one unstreamed chat through the gate and returns the error
// Ollama's client reports (nil on success).
func chatOnce(t *testing.T, c *ollama.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	stream := false
	return c.Chat(ctx, &ollama.ChatRequest{
		Model:    borrowedModel,
		Messages: []ollama.Message{{Role: "user", Content: "hi"}},
		Stream:   &stream,
	}, func(ollama.ChatResponse) error { return nil })
}

// gateInference sends an inference request straight to a gate, to read the
// refusal's status, headers and body as they are on the wire.
func gateInference(t *testing.T, gate, token, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+gate+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s through the gate: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// assertOllamaNotLending checks a gate's refusal of inference: 503, a Retry-After
// hint, and Ollama's own error shape ({"error": "..."}) naming the reason.
func assertOllamaNotLending(t *testing.T, gate, token, reason string) {
	t.Helper()
	r := gateInference(t, gate, token, "/api/chat", `{"model":"`+borrowedModel+`","messages":[{"role":"user","content":"hi"}],"stream":false}`)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("inference while not lending (%s) = %d: %s", reason, r.Status, r.Body)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s <= 0 {
		t.Errorf("Retry-After = %q, want a number of seconds", r.Header.Get("Retry-After"))
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body) != 1 {
		t.Fatalf("refusal is not Ollama's error shape: %v: %s", err, r.Body)
	}
	msg, _ := body["error"].(string)
	if !strings.Contains(msg, "("+reason+")") {
		t.Fatalf("refusal %q does not name the reason %s", msg, reason)
	}
	// Ollama's client reads the same answer as an api.StatusError.
	err := chatOnce(t, ollamaBorrower(t, gate, token))
	var se ollama.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || !strings.Contains(se.ErrorMessage, reason) {
		t.Fatalf("Ollama's client got %T %v, want a 503 api.StatusError naming %s", err, err, reason)
	}
}

// unloadCalls returns the requests the Ollama fake got that unload model:
// POST /api/generate with keep_alive 0 and no prompt, as the reclaim sends.
func unloadCalls(fake *fakeupstream.Ollama, model string) []fakeupstream.Recorded {
	var out []fakeupstream.Recorded
	for _, r := range fake.RequestsTo("/api/generate") {
		var body struct {
			Model     string          `json:"model"`
			Prompt    string          `json:"prompt"`
			KeepAlive json.RawMessage `json:"keep_alive"`
		}
		if r.Method != http.MethodPost || r.JSON(&body) != nil || body.Prompt != "" {
			continue
		}
		if strings.TrimSuffix(body.Model, ":latest") != strings.TrimSuffix(model, ":latest") {
			continue
		}
		if ka := strings.TrimSpace(string(body.KeepAlive)); ka == "0" || ka == `"0"` || ka == `"0s"` {
			out = append(out, r)
		}
	}
	return out
}

// loadedNames lists the fake's /api/ps table.
func loadedNames(fake *fakeupstream.Ollama) []string {
	var out []string
	for _, m := range fake.Loaded() {
		out = append(out, m.Name)
	}
	return out
}

// metricValue reads one unlabelled (or fully labelled) sample from /metrics.
func metricValue(t *testing.T, d *proc.Daemon, series string) float64 {
	t.Helper()
	r := do(t, http.MethodGet, d.API+"/metrics")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", r.Status, r.Body)
	}
	for line := range bytes.Lines(r.Body) {
		name, value, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("bad sample %q", line)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}

// assertReclaimed checks everything a reclaim of the borrowed Ollama chat
// must have done: the stream was cut (the fake saw its request cancelled),
// the borrowed model was unloaded and is no longer loaded, the reclaim is
// recorded with one cancelled work item, and the work is gone.
func assertReclaimed(t *testing.T, d *proc.Daemon, fake *fakeupstream.Ollama, s *stream, reason string) {
	t.Helper()
	select {
	case err := <-s.done:
		// The gate closes the stream mid-answer. Ollama's client does not
		// check its scanner's error, so a cut stream can return nil; what
		// shows the cut is that the final chunk never came.
		t.Logf("the borrower's stream ended: %v", err)
	case <-time.After(patience):
		t.Fatal("the borrower's stream was never cut: reclaim did not cancel it")
	}
	if s.completed.Load() {
		t.Fatal("the borrower's stream ran to its end: the fake was released, not the request cancelled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := fake.WaitCancelled(ctx, 1); err != nil {
		t.Fatalf("the upstream never saw the borrowed request cancelled (%d cancelled)", fake.Cancelled())
	}
	waitFor(t, "the unload call for "+borrowedModel, func() bool { return len(unloadCalls(fake, borrowedModel)) > 0 })
	waitFor(t, "the fake to drop "+borrowedModel, func() bool { return len(loadedNames(fake)) == 0 })

	doc := waitStatus(t, d, "the reclaim record in /status", func(doc engineDoc) bool { return doc.gpu().LastReclaim != nil })
	lr := doc.gpu().LastReclaim
	if lr.Reason != reason || lr.Cancelled != 1 || lr.Held != 0 || len(lr.UnloadErrors) != 0 {
		t.Fatalf("last_reclaim = %+v, want reason %s, 1 cancelled, none held, no unload errors", *lr, reason)
	}
	if lr.AdmissionsClosedS == nil || lr.WorkEndedS == nil || lr.UnloadedS == nil || lr.At == "" {
		t.Fatalf("last_reclaim lacks its phases: %+v", *lr)
	}
	t.Logf("reclaim phases: admissions closed %.4fs, work ended %.4fs, unloaded %.4fs",
		*lr.AdmissionsClosedS, *lr.WorkEndedS, *lr.UnloadedS)
	if len(doc.State.Work) != 0 {
		t.Fatalf("/status still lists work after the reclaim: %+v", doc.State.Work)
	}
}

// assertBorrowing checks that /status lists exactly the one running chat.
func assertBorrowing(t *testing.T, d *proc.Daemon, upstream, borrower string) {
	t.Helper()
	doc := engineStatus(t, d)
	if len(doc.State.Work) != 1 {
		t.Fatalf("/status work = %+v, want the one borrowed chat", doc.State.Work)
	}
	w := doc.State.Work[0]
	if w.State != "running" || w.Upstream != upstream || w.Borrower != borrower || w.Resource != lentResource || w.Model != borrowedModel || w.ID == 0 {
		t.Fatalf("/status work = %+v", w)
	}
}

// lendingSetup is one lending test's daemon.
type lendingSetup struct {
	// kind and target are the gate's upstream.
	kind, target string
	// lending and presence are the bodies of the [lending] and [presence]
	// tables (nvml is always off: the tests must not depend on the
	// machine's GPU).
	lending, presence string
	files             map[string]string
}

// lendingDaemon is a running daemon with one gate and its credentials.
type lendingDaemon struct {
	*proc.Daemon
	// gate is the gate's host:port; upstream is its id.
	gate, upstream string
	// sock is the admin socket.
	sock string
	// borrow is the "cluster" token (borrow scope); admin the "operator"
	// token (read and admin).
	borrow, admin string
}

const (
	borrowerName = "cluster"
	adminName    = "operator"
)

func startLending(t *testing.T, s lendingSetup) *lendingDaemon {
	t.Helper()
	ld := &lendingDaemon{gate: hostPort(t, "127.0.0.1"), upstream: s.kind, borrow: newToken(t), admin: newToken(t)}
	api := hostPort(t, "127.0.0.1")
	ld.sock = filepath.Join(t.TempDir(), "run", "admin.sock")
	files := map[string]string{
		"secrets/borrow.token": ld.borrow + "\n",
		"secrets/admin.token":  ld.admin + "\n",
	}
	for k, v := range s.files {
		files[k] = v
	}
	cfg := fmt.Sprintf(`[server]
listen = %q
admin_socket = %q

[[auth.token]]
name = %q
scopes = ["borrow"]
value_file = "secrets/borrow.token"

[[auth.token]]
name = %q
scopes = ["read", "admin"]
value_file = "secrets/admin.token"

[lending]
%s

[presence]
nvml = "off"
session_timeout = "5m"
%s

[[upstream]]
id = %q
listen = %q
target = %q
kind = %q
`, api, ld.sock, borrowerName, adminName, s.lending, s.presence, ld.upstream, ld.gate, s.target, s.kind)
	ld.Daemon = proc.Start(t, api, cfg, files)
	waitSocket(t, ld.sock)
	return ld
}

// assertStatusSays runs vacancyd status against the daemon and fails unless
// its output holds every line fragment in want: the owner's view of why
// lending is on or off.
func assertStatusSays(t *testing.T, d *proc.Daemon, want ...string) {
	t.Helper()
	code, out := runBinary(t, "status", "--api", d.API)
	if code != 0 {
		t.Fatalf("vacancyd status: exit %d: %s", code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("vacancyd status does not say %q:\n%s", w, out)
		}
	}
}
