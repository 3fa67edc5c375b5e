//go:build linux

package e2e

// Helpers for the real-Ollama tests: waiting, reading the tap, and the
// daemon's status, metrics and admin routes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

// roWait polls cond until it holds, failing after patience.
func roWait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// roExchange returns the last exchange through tap whose request body holds
// marker.
func roExchange(tap *realollama.Tap, marker string) (realollama.Exchange, bool) {
	ex := tap.Exchanges()
	for i := len(ex) - 1; i >= 0; i-- {
		if strings.Contains(string(ex[i].Body), marker) {
			return ex[i], true
		}
	}
	return realollama.Exchange{}, false
}

// assertCutByGate waits for the exchange holding marker to end and checks
// that the gate hung up on it while Ollama's answer was still unfinished,
// and that Ollama ended the request (its router logged it). Requests on
// path must all come through tap.
func (e *roEnv) assertCutByGate(t *testing.T, tap *realollama.Tap, marker, path, doneMark string) {
	t.Helper()
	var ex realollama.Exchange
	roWait(t, "the gate to hang up on Ollama's answer", func() bool {
		var ok bool
		ex, ok = roExchange(tap, marker)
		return ok && ex.ClosedBy != ""
	})
	if ex.ClosedBy != "client" || ex.Complete || strings.Contains(string(ex.Answer), doneMark) {
		t.Fatalf("the upstream exchange ended closed by %q, complete %v, answer tail %q: want the gate to hang up on an unfinished answer",
			ex.ClosedBy, ex.Complete, roTail(ex.Answer))
	}
	// Ollama's router logs each request when its handler returns: once it
	// has logged as many as went through the tap, it has ended this one.
	roWait(t, "Ollama to end the request", func() bool {
		through := 0
		for _, x := range tap.Exchanges() {
			if x.Method == http.MethodPost && x.Path == path {
				through++
			}
		}
		return realollama.Count(realollama.Requests(e.ollama.Log.String()), http.MethodPost, path) >= through
	})
}

// roProgress says how far Ollama's answer to the request holding marker
// had come, for a failure message: an answer well under way that never
// reached the borrower means the gate held it back.
func roProgress(tap *realollama.Tap, marker string) string {
	ex, ok := roExchange(tap, marker)
	if !ok {
		return "the request never reached Ollama"
	}
	msg := fmt.Sprintf("Ollama had sent %d bytes of its answer through the tap (complete %v)", len(ex.Answer), ex.Complete)
	if len(ex.Answer) > 0 {
		msg += ", none of which reached the borrower as a token: the gate held the stream back"
	}
	return msg
}

func roTail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

// roAssertUnfinished fails unless the exchange holding marker is
// still unfinished at Ollama: called when the borrower has just received
// its first token, it proves the gate passed the token on while Ollama was
// still generating, instead of buffering the answer.
func roAssertUnfinished(t *testing.T, tap *realollama.Tap, marker string) {
	t.Helper()
	ex, ok := roExchange(tap, marker)
	if !ok {
		t.Fatalf("the borrower has a token but the tap saw no request holding %q", marker)
	}
	if ex.Complete || ex.ClosedBy != "" {
		t.Fatalf("when the borrower got its first token, Ollama's answer had already ended (complete %v, closed by %q): the gate buffered the stream",
			ex.Complete, ex.ClosedBy)
	}
}

// roStatus is the part of /status these tests read.
type roStatus struct {
	Lending struct {
		Enabled bool `json:"lending_enabled"`
	} `json:"lending"`
	State struct {
		Resources map[string]struct {
			Lendable    bool   `json:"lendable"`
			Reason      string `json:"reason"`
			LastReclaim *struct {
				Reason       string   `json:"reason"`
				Cancelled    int      `json:"cancelled"`
				Held         int      `json:"held"`
				UnloadErrors []string `json:"unload_errors"`
			} `json:"last_reclaim"`
		} `json:"resources"`
		Work []struct {
			Upstream string `json:"upstream"`
			Borrower string `json:"borrower"`
			Model    string `json:"model"`
			State    string `json:"state"`
		} `json:"work"`
	} `json:"state"`
}

func (e *roEnv) status(tb testing.TB) roStatus {
	tb.Helper()
	resp, err := client.Get(e.d.API + "/status")
	if err != nil {
		tb.Fatalf("GET /status: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /status = %d (%v): %s", resp.StatusCode, err, body)
	}
	var st roStatus
	if err := json.Unmarshal(body, &st); err != nil {
		tb.Fatalf("/status: %v: %s", err, body)
	}
	return st
}

func (e *roEnv) waitLendable(tb testing.TB) {
	tb.Helper()
	roWait(tb, "gpu0 to be lendable", func() bool { return e.status(tb).State.Resources["gpu0"].Lendable })
}

// pause pauses lending over loopback, as the owner's own tools may.
func (e *roEnv) pause(t *testing.T) {
	t.Helper()
	r := do(t, http.MethodPost, e.d.API+"/admin/lending/disable", intent)
	if r.Status != http.StatusOK {
		t.Fatalf("pausing lending over loopback = %d: %s", r.Status, r.Body)
	}
}

// reportPresence sends a session report over the admin socket with
// vacancyd admin-request, as the session reporter does.
func (e *roEnv) reportPresence(t *testing.T, idleSeconds float64) {
	t.Helper()
	req := fmt.Sprintf(`{"protocol_version":1,"action":{"kind":"report_presence","idle_seconds":%s,"source":"x11","inhibited":false}}`,
		strconv.FormatFloat(idleSeconds, 'f', -1, 64))
	roWait(t, "the admin socket", func() bool {
		_, err := os.Stat(e.sock)
		return err == nil
	})
	f := filepath.Join(t.TempDir(), "presence.json")
	if err := os.WriteFile(f, []byte(req), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runBinary(t, "admin-request", "--socket", e.sock, "--request", f); code != 0 {
		t.Fatalf("report_presence (idle %gs): exit %d: %s", idleSeconds, code, out)
	}
}

var roSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$`)

// metric reads the sample of name whose labels include every pair of
// labels (0 if there is none).
func (e *roEnv) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	r := do(t, http.MethodGet, e.d.API+"/metrics")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", r.Status)
	}
	for line := range strings.Lines(string(r.Body)) {
		m := roSample.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] != name {
			continue
		}
		have := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			have[p[1]] = p[2]
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if match {
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Fatalf("bad sample %q", line)
			}
			return v
		}
	}
	return 0
}

func (e *roEnv) requests(t *testing.T, gate, outcome string) float64 {
	t.Helper()
	return e.metric(t, "vacancyd_requests_total", map[string]string{"upstream": gate, "outcome": outcome})
}

// post sends body to url as the borrower, with Go's plain HTTP client.
func (e *roEnv) post(t *testing.T, url, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func roCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// errRoStop ends a client's stream from its callback.
var errRoStop = errors.New("enough")
