//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vacancyd/vacancyd/internal/testutil/gguf"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

// The real-upstream tests put the real vacancyd binary in front of a real
// Ollama server (internal/testutil/realollama: Ollama v0.6.5 built from its
// Go module) that runs real inference on the project's generated tiny llama
// model (internal/testutil/gguf), and drive it with the official Ollama and
// OpenAI Go clients. Between each gate and Ollama sits a tap, a transparent
// TCP relay that records every byte, because Ollama does not log request
// headers: it shows what the gate sent upstream, and when the gate hung up
// on an answer that was still coming.
//
// Every assertion is about what happened (a chunk arrived while Ollama's
// answer was unfinished, a request never reached Ollama, /api/ps is empty),
// never about how long it took; waits are bounded by patience only.

// roModel is the tiny model's name in Ollama.
const roModel = "tiny"

// roGate is one [[upstream]] gate in front of the real Ollama.
type roGate struct {
	id           string
	management   string // "deny" or "allow"
	forwardAuth  bool
	maxKeepAlive string // "" means the default
}

// roSetup shapes one real-Ollama test: its gates (default: one "ollama"
// gate, management denied) and the [lending] and [presence] bodies
// (default: a short grace, and a headless box that lends at once).
type roSetup struct {
	gates             []roGate
	lending, presence string
}

// roRunning is a gate's address and the tap between it and Ollama.
type roRunning struct {
	roGate
	addr string
	tap  *realollama.Tap
}

func roStart(tb testing.TB, s roSetup) *roEnv {
	tb.Helper()
	if len(s.gates) == 0 {
		s.gates = []roGate{{id: "ollama", management: "deny"}}
	}
	if s.lending == "" {
		s.lending = "reclaim_grace = \"1s\"\nunload_timeout = \"10s\""
	}
	if s.presence == "" {
		s.presence = "sources = []"
	}
	o := realollama.Start(tb, realollama.Options{})
	o.CreateModel(tb, roModel, gguf.Tiny())

	e := &roEnv{ollama: o, token: roToken(tb), gates: map[string]*roRunning{}}
	api := roHostPort(tb)
	e.sock = filepath.Join(tb.TempDir(), "run", "admin.sock")
	var ups strings.Builder
	for _, g := range s.gates {
		r := &roRunning{roGate: g, addr: roHostPort(tb), tap: o.Tap(tb)}
		e.gates[g.id] = r
		fmt.Fprintf(&ups, "\n[[upstream]]\nid = %q\nlisten = %q\ntarget = %q\nkind = \"ollama\"\nmanagement = %q\nforward_authorization = %t\n",
			g.id, r.addr, r.tap.URL, g.management, g.forwardAuth)
		if g.maxKeepAlive != "" {
			fmt.Fprintf(&ups, "max_keep_alive = %q\n", g.maxKeepAlive)
		}
	}
	cfg := fmt.Sprintf(`[server]
listen = %q
admin_socket = %q

[[auth.token]]
name = "borrower"
scopes = ["borrow"]
value_file = "secrets/borrow.token"

[lending]
%s

[presence]
nvml = "off"
session_timeout = "5m"
%s
%s`, api, e.sock, s.lending, s.presence, ups.String())
	e.d = proc.Start(tb, api, cfg, map[string]string{"secrets/borrow.token": e.token + "\n"})
	// Runs before the daemon and Ollama stop: whatever the test did, the
	// borrower's token reached neither Ollama (its log, or the bytes a
	// non-forwarding gate sent it) nor vacancyd's log.
	tb.Cleanup(func() { e.assertTokenKept(tb) })
	return e
}

// roEnv is a running real Ollama with the tiny model, and a vacancyd whose
// gates reach it through taps.
type roEnv struct {
	ollama *realollama.Server
	d      *proc.Daemon
	// token is the borrower's ("borrower", scope borrow).
	token string
	sock  string
	gates map[string]*roRunning
}

func (e *roEnv) gate(id string) *roRunning {
	g, ok := e.gates[id]
	if !ok {
		panic("no gate " + id)
	}
	return g
}

func (e *roEnv) assertTokenKept(tb testing.TB) {
	if strings.Contains(e.ollama.Log.String(), e.token) {
		tb.Error("the borrower's token appears in Ollama's log")
	}
	if strings.Contains(e.d.Log.String(), e.token) {
		tb.Error("the borrower's token appears in vacancyd's log")
	}
	for id, g := range e.gates {
		if g.forwardAuth {
			continue
		}
		if strings.Contains(string(g.tap.Sent()), e.token) {
			tb.Errorf("gate %s sent the borrower's token to Ollama", id)
		}
	}
}

// borrowerHTTPClient presents the borrower's token as a bearer token.
func (e *roEnv) borrowerHTTPClient() *http.Client {
	return &http.Client{Transport: roBearer{token: e.token, base: &http.Transport{Proxy: nil}}}
}

type roBearer struct {
	token string
	base  http.RoundTripper
}

func (b roBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// ollamaClient is Ollama's own Go client, borrowing through gate id.
func (e *roEnv) ollamaClient(id string) *ollama.Client {
	u, _ := url.Parse("http://" + e.gate(id).addr)
	return ollama.NewClient(u, e.borrowerHTTPClient())
}

// openaiClient is the official OpenAI client, borrowing through gate id.
// Retries are off: a 503 must reach the test, not be retried after
// Retry-After.
func (e *roEnv) openaiClient(id string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL("http://"+e.gate(id).addr+"/v1/"),
		option.WithAPIKey(e.token),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{Proxy: nil}}),
	)
}

// roToken is a fresh 256-bit token, as vacancyd gen-token makes them.
func roToken(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func roHostPort(tb testing.TB) string {
	tb.Helper()
	return "127.0.0.1:" + strconv.Itoa(proc.FreePort(tb, "127.0.0.1"))
}

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
		return realollama.Count(e.ollama.Log.Requests(), http.MethodPost, path) >= through
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

// Streaming through the gate, with both official clients: whole streams
// arrive token by token, and each client's first token arrives while
// Ollama is still generating the answer (the tap shows it unfinished), so a
// gate that buffered would fail here. Model discovery passes too.
func TestRealOllamaStreamsThroughTheGate(t *testing.T) {
	e := roStart(t, roSetup{})
	e.waitLendable(t)
	g := e.gate("ollama")
	c := e.ollamaClient("ollama")

	t.Run("generate", func(t *testing.T) {
		var chunks []ollama.GenerateResponse
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "once upon a time",
			Options: map[string]any{"num_predict": 16, "seed": 7}},
			func(r ollama.GenerateResponse) error { chunks = append(chunks, r); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) != 17 {
			t.Fatalf("%d chunks: want 16 tokens one by one, then done", len(chunks))
		}
		last := chunks[16]
		if !last.Done || last.DoneReason != "length" || last.EvalCount != 16 {
			t.Fatalf("%d chunks, last %+v: want 16 tokens one by one, then done", len(chunks), last)
		}
		for _, ch := range chunks[:16] {
			if ch.Done || ch.Response == "" {
				t.Fatalf("chunk %+v: want one token each", ch)
			}
		}

		const marker = "generate stream proof"
		n := 0
		err = c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: marker, Options: map[string]any{"num_predict": -1}},
			func(r ollama.GenerateResponse) error {
				if r.Response == "" {
					return nil
				}
				n++
				roAssertUnfinished(t, g.tap, marker)
				return errRoStop
			})
		if !errors.Is(err, errRoStop) || n != 1 {
			t.Fatalf("generate ended with %v after %d tokens, want the test to stop it at its first; %s", err, n, roProgress(g.tap, marker))
		}
		e.assertCutByGate(t, g.tap, marker, "/api/generate", `"done":true`)
	})

	t.Run("chat", func(t *testing.T) {
		var text strings.Builder
		var last ollama.ChatResponse
		chunks := 0
		err := c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel,
			Messages: []ollama.Message{{Role: "user", Content: "hello there"}},
			Options:  map[string]any{"num_predict": 12, "seed": 7}},
			func(r ollama.ChatResponse) error {
				chunks++
				text.WriteString(r.Message.Content)
				last = r
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if chunks != 13 || !last.Done || last.EvalCount != 12 || last.Message.Role != "assistant" || text.Len() == 0 {
			t.Fatalf("%d chunks, text %q, last %+v", chunks, text.String(), last)
		}

		const marker = "chat stream proof"
		n := 0
		err = c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel,
			Messages: []ollama.Message{{Role: "user", Content: marker}},
			Options:  map[string]any{"num_predict": -1}},
			func(r ollama.ChatResponse) error {
				if r.Message.Content == "" {
					return nil
				}
				n++
				roAssertUnfinished(t, g.tap, marker)
				return errRoStop
			})
		if !errors.Is(err, errRoStop) || n != 1 {
			t.Fatalf("chat ended with %v after %d tokens; %s", err, n, roProgress(g.tap, marker))
		}
		e.assertCutByGate(t, g.tap, marker, "/api/chat", `"done":true`)
	})

	t.Run("openai chat completions", func(t *testing.T) {
		oc := e.openaiClient("ollama")
		stream := oc.Chat.Completions.NewStreaming(roCtx(t), openai.ChatCompletionNewParams{
			Model:     roModel,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")},
			MaxTokens: openai.Int(10),
			Seed:      openai.Int(7),
		})
		var text strings.Builder
		chunks, finish := 0, ""
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				if ch.Delta.Content != "" {
					chunks++
				}
				text.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if chunks != 10 || finish != "length" {
			t.Fatalf("%d content chunks (%q), finish %q: want 10 tokens one by one, then length", chunks, text.String(), finish)
		}

		const marker = "openai stream proof"
		stream = oc.Chat.Completions.NewStreaming(roCtx(t), openai.ChatCompletionNewParams{
			Model:    roModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(marker)},
		})
		got := false
		for !got && stream.Next() {
			for _, ch := range stream.Current().Choices {
				got = got || ch.Delta.Content != ""
			}
		}
		if !got {
			t.Fatalf("the stream ended before a token: %v; %s", stream.Err(), roProgress(g.tap, marker))
		}
		roAssertUnfinished(t, g.tap, marker)
		stream.Close()
		e.assertCutByGate(t, g.tap, marker, "/v1/chat/completions", "[DONE]")
	})

	t.Run("list and show", func(t *testing.T) {
		list, err := c.List(roCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Models) != 1 || list.Models[0].Name != roModel+":latest" || list.Models[0].Details.Family != "llama" || list.Models[0].Details.Format != "gguf" {
			t.Fatalf("List through the gate = %+v", list.Models)
		}
		show, err := c.Show(roCtx(t), &ollama.ShowRequest{Model: roModel})
		if err != nil {
			t.Fatal(err)
		}
		if show.Details.Family != "llama" || show.ModelInfo["general.architecture"] != "llama" ||
			show.ModelInfo["llama.embedding_length"] != float64(64) || show.ModelInfo["llama.block_count"] != float64(2) {
			t.Fatalf("Show through the gate = details %+v, model_info %v", show.Details, show.ModelInfo)
		}
		oc := e.openaiClient("ollama")
		page, err := oc.Models.List(roCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != roModel+":latest" {
			t.Fatalf("/v1/models through the gate = %+v", page.Data)
		}
	})

	// Nothing is left running at the gate.
	if w := e.status(t).State.Work; len(w) != 0 {
		t.Fatalf("/status still lists work: %+v", w)
	}
}

// Management: a gate with management denied refuses pull, create (and blob
// upload), delete, copy and ps before anything reaches Ollama; a gate with
// management = "allow" hands each of them to Ollama, which acts on them.
func TestRealOllamaManagementRefusedOrAllowed(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{
		{id: "ollama", management: "deny"},
		{id: "ollama-admin", management: "allow"},
	}})
	digest := "sha256:" + strings.Repeat("ab", 32)
	ops := []struct {
		name, method, path string
		call               func(ctx context.Context, c *ollama.Client) error
	}{
		{"pull", "POST", "/api/pull", func(ctx context.Context, c *ollama.Client) error {
			// An address that refuses at once: Ollama must try and fail.
			return c.Pull(ctx, &ollama.PullRequest{Model: "127.0.0.1:1/library/nothing:latest", Insecure: true}, func(ollama.ProgressResponse) error { return nil })
		}},
		{"blob upload", "POST", "/api/blobs/" + digest, func(ctx context.Context, c *ollama.Client) error {
			return c.CreateBlob(ctx, digest, strings.NewReader("not the right bytes"))
		}},
		{"create", "POST", "/api/create", func(ctx context.Context, c *ollama.Client) error {
			return c.Create(ctx, &ollama.CreateRequest{Model: "tiny-made", From: roModel}, func(ollama.ProgressResponse) error { return nil })
		}},
		{"copy", "POST", "/api/copy", func(ctx context.Context, c *ollama.Client) error {
			return c.Copy(ctx, &ollama.CopyRequest{Source: roModel, Destination: "tiny-copy"})
		}},
		{"ps", "GET", "/api/ps", func(ctx context.Context, c *ollama.Client) error {
			_, err := c.ListRunning(ctx)
			return err
		}},
		{"delete", "DELETE", "/api/delete", func(ctx context.Context, c *ollama.Client) error {
			return c.Delete(ctx, &ollama.DeleteRequest{Model: "tiny-copy"})
		}},
	}

	deny := e.ollamaClient("ollama")
	mark := e.ollama.Log.Mark()
	before := e.requests(t, "ollama", "refused_management")
	for _, op := range ops {
		err := op.call(roCtx(t), deny)
		var se ollama.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusForbidden {
			t.Errorf("%s through a deny gate: %T %v, want a 403 api.StatusError", op.name, err, err)
		}
	}
	if got := e.requests(t, "ollama", "refused_management") - before; got != float64(len(ops)) {
		t.Errorf("refused_management moved by %v, want %d", got, len(ops))
	}
	if n := len(e.gate("ollama").tap.Conns()); n != 0 {
		t.Errorf("the deny gate opened %d connections to Ollama", n)
	}
	if rs := realollama.Requests(e.ollama.Log.Since(mark)); len(rs) != 0 {
		t.Errorf("Ollama logged requests while the deny gate refused management: %+v", rs)
	}

	allow := e.ollamaClient("ollama-admin")
	for _, op := range ops {
		mark := e.ollama.Log.Mark()
		err := op.call(roCtx(t), allow)
		switch op.name {
		case "pull":
			// Ollama's own error, not the gate's refusal.
			var se ollama.StatusError
			if err == nil || (errors.As(err, &se) && se.StatusCode == http.StatusForbidden) || !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("pull through the allow gate: %v, want Ollama's failure to reach 127.0.0.1:1", err)
			}
		case "blob upload":
			// Ollama checks the digest of what it receives.
			var se ollama.StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || !strings.Contains(se.ErrorMessage, "digest") {
				t.Errorf("blob upload through the allow gate: %T %v, want Ollama's digest mismatch", err, err)
			}
		default:
			if err != nil {
				t.Errorf("%s through the allow gate: %v", op.name, err)
			}
		}
		roWait(t, "Ollama to log "+op.method+" "+op.path, func() bool {
			return realollama.Count(realollama.Requests(e.ollama.Log.Since(mark)), op.method, op.path) == 1
		})
	}
	// Ollama acted: the created model exists, the copy came and went.
	list, err := e.ollama.Client().List(roCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"tiny-made:latest", "tiny:latest"}) {
		t.Fatalf("Ollama's models after management through the allow gate: %v", names)
	}
}

// A borrower's keep_alive is capped: asked for 24h through a gate with
// max_keep_alive = "1m", Ollama's own /api/ps expiry is a minute away; the
// same request sent directly keeps the model for a day.
func TestRealOllamaKeepAliveCapped(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{{id: "ollama", management: "deny", maxKeepAlive: "1m"}}})
	e.waitLendable(t)
	generate := func(c *ollama.Client) {
		t.Helper()
		stream := false
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "keep me", Stream: &stream,
			KeepAlive: &ollama.Duration{Duration: 24 * time.Hour}, Options: map[string]any{"num_predict": 2}},
			func(ollama.GenerateResponse) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	// expiry waits until Ollama's scheduler has set the model's idle timer
	// (its debug line), then reads /api/ps directly.
	expiry := func(mark realollama.Mark) (time.Time, time.Time) {
		t.Helper()
		roWait(t, "Ollama's idle timer", func() bool { return strings.Contains(e.ollama.Log.Since(mark), "has gone idle") })
		ps := e.ollama.Loaded(t)
		read := time.Now()
		if len(ps) != 1 || ps[0].Name != roModel+":latest" {
			t.Fatalf("/api/ps = %+v", ps)
		}
		return ps[0].ExpiresAt, read
	}

	start := time.Now()
	mark := e.ollama.Log.Mark()
	generate(e.ollamaClient("ollama"))
	exp, read := expiry(mark)
	if exp.Before(start.Add(time.Minute)) || exp.After(read.Add(time.Minute)) {
		t.Fatalf("after a borrower asked for 24h: Ollama expires the model at %s, want a minute after the request (%s .. %s)",
			exp.Format(time.RFC3339Nano), start.Add(time.Minute).Format(time.RFC3339Nano), read.Add(time.Minute).Format(time.RFC3339Nano))
	}
	ex, ok := roExchange(e.gate("ollama").tap, "keep me")
	if !ok || !strings.Contains(string(ex.Body), `"keep_alive":"1m0s"`) {
		t.Fatalf("the gate sent Ollama %s", ex.Body)
	}

	mark = e.ollama.Log.Mark()
	generate(e.ollama.Client())
	exp, _ = expiry(mark)
	if exp.Before(time.Now().Add(23 * time.Hour)) {
		t.Fatalf("asked directly for 24h, Ollama expires the model at %s", exp)
	}
}

// Reclaim: a borrower's long generation is streaming when the owner takes
// the GPU back (pausing lending over loopback, or a session report of
// activity). The stream ends; the gate hung up on Ollama's unfinished
// answer and Ollama ended the request; the reclaim unloaded the borrowed
// model, so Ollama's own /api/ps is empty; vacancyd counts the request as
// reclaimed and records the reclaim.
func TestRealOllamaReclaimCancelsAndUnloads(t *testing.T) {
	for _, tc := range []struct {
		name, presence, reason string
		setup, trigger         func(t *testing.T, e *roEnv)
	}{
		{
			name: "pause over loopback", reason: "lending_paused",
			trigger: func(t *testing.T, e *roEnv) { e.pause(t) },
		},
		{
			name: "session report", reason: "owner_present", presence: `sources = ["session"]`,
			setup:   func(t *testing.T, e *roEnv) { e.reportPresence(t, 3600) },
			trigger: func(t *testing.T, e *roEnv) { e.reportPresence(t, 0) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := roStart(t, roSetup{
				lending:  "idle_after = \"10s\"\nreclaim_grace = \"1s\"\nunload_timeout = \"10s\"",
				presence: tc.presence,
			})
			if tc.setup != nil {
				tc.setup(t, e)
			}
			e.waitLendable(t)
			g := e.gate("ollama")
			c := e.ollamaClient("ollama")

			const marker = "a very long story"
			first := make(chan struct{})
			result := make(chan error, 1)
			var sawDone bool
			tokens := 0
			ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
			defer cancel()
			go func() {
				result <- c.Generate(ctx, &ollama.GenerateRequest{Model: roModel, Prompt: marker,
					Options: map[string]any{"num_predict": -1}},
					func(r ollama.GenerateResponse) error {
						if r.Done {
							sawDone = true
						}
						if tokens++; tokens == 1 {
							close(first)
						}
						return nil
					})
			}()
			select {
			case <-first:
			case err := <-result:
				t.Fatalf("the borrowed generation ended before its first token: %v", err)
			case <-time.After(patience):
				t.Fatal("no first token of the borrowed generation")
			}
			if ps := e.ollama.Loaded(t); len(ps) != 1 || ps[0].Name != roModel+":latest" {
				t.Fatalf("Ollama's /api/ps while borrowed: %+v", ps)
			}
			if w := e.status(t).State.Work; len(w) != 1 || w[0].Borrower != "borrower" || w[0].State != "running" || !strings.HasPrefix(w[0].Model, roModel) {
				t.Fatalf("/status work while borrowed: %+v", w)
			}

			mark := e.ollama.Log.Mark()
			tc.trigger(t, e)

			select {
			case err := <-result:
				// Ollama's client ignores its reader's error, so a cut
				// stream may return nil; the missing final chunk shows it.
				t.Logf("the borrowed stream ended after %d chunks: %v", tokens, err)
			case <-time.After(patience):
				t.Fatal("the borrowed stream never ended: the reclaim did not cancel it")
			}
			if sawDone {
				t.Fatal("the borrowed generation ran to its end instead of being cancelled")
			}
			e.assertCutByGate(t, g.tap, marker, "/api/generate", `"done":true`)

			// The unload reached Ollama and worked.
			e.ollama.WaitUnloaded(t)
			if !strings.Contains(e.ollama.Log.Since(mark), "runner released") {
				t.Error("Ollama's log shows no runner released after the reclaim")
			}
			var unload *realollama.Exchange
			for _, ex := range g.tap.Exchanges() {
				var body struct {
					Model     string          `json:"model"`
					Prompt    *string         `json:"prompt"`
					KeepAlive json.RawMessage `json:"keep_alive"`
				}
				if ex.Path == "/api/generate" && json.Unmarshal(ex.Body, &body) == nil && body.Prompt == nil && string(body.KeepAlive) == "0" {
					unload = &ex
				}
			}
			if unload == nil || unload.Status != http.StatusOK || !strings.Contains(string(unload.Answer), `"done_reason":"unload"`) {
				t.Fatalf("no unload that Ollama carried out among the gate's upstream requests: %+v", unload)
			}

			var st roStatus
			roWait(t, "the reclaim record", func() bool {
				st = e.status(t)
				return st.State.Resources["gpu0"].LastReclaim != nil
			})
			lr := st.State.Resources["gpu0"].LastReclaim
			if lr.Reason != tc.reason || lr.Cancelled != 1 || lr.Held != 0 || len(lr.UnloadErrors) != 0 {
				t.Fatalf("last_reclaim = %+v, want reason %s, one cancelled, none held, no unload errors", *lr, tc.reason)
			}
			if len(st.State.Work) != 0 {
				t.Fatalf("/status still lists work: %+v", st.State.Work)
			}
			roWait(t, "the reclaimed request to be counted", func() bool { return e.requests(t, "ollama", "reclaimed") == 1 })
		})
	}
}

// Paused lending: Ollama's client (and the OpenAI client) get a clean 503
// naming the reason, with Retry-After, and no request reaches Ollama:
// neither its request log nor the tap sees anything. Model discovery still
// passes.
func TestRealOllamaPausedLendingRefusesCleanly(t *testing.T) {
	e := roStart(t, roSetup{})
	e.waitLendable(t)
	e.pause(t)
	roWait(t, "lending to be paused", func() bool { return !e.status(t).Lending.Enabled })
	g := e.gate("ollama")
	mark := e.ollama.Log.Mark()
	before := e.requests(t, "ollama", "not_lending")

	c := e.ollamaClient("ollama")
	err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "hi"}, func(ollama.GenerateResponse) error {
		t.Error("a token arrived while lending is paused")
		return nil
	})
	var se ollama.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || !strings.Contains(se.ErrorMessage, "lending_paused") {
		t.Fatalf("generate while paused: %T %v, want a 503 api.StatusError naming lending_paused", err, err)
	}
	err = c.Chat(roCtx(t), &ollama.ChatRequest{Model: roModel, Messages: []ollama.Message{{Role: "user", Content: "hi"}}},
		func(ollama.ChatResponse) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("chat while paused: %T %v, want a 503 api.StatusError", err, err)
	}
	r := e.post(t, "http://"+g.addr+"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("raw /v1/chat/completions while paused = %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}
	t.Run("openai client", func(t *testing.T) {
		oc := e.openaiClient("ollama")
		_, err := oc.Chat.Completions.New(roCtx(t), openai.ChatCompletionNewParams{
			Model: roModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var oe *openai.Error
		switch {
		case errors.As(err, &oe):
			// The gate answers Ollama's /v1 routes in OpenAI's error shape,
			// as Ollama's own /v1 routes do.
			if oe.StatusCode != http.StatusServiceUnavailable || oe.Code != "lending_paused" {
				t.Fatalf("OpenAI client while paused: status %d code %q, want 503 lending_paused", oe.StatusCode, oe.Code)
			}
		default:
			t.Fatalf("OpenAI client while paused: %T %v, want a 503 openai.Error with code lending_paused", err, err)
		}
	})
	r = e.post(t, "http://"+g.addr+"/api/generate", `{"model":"tiny","prompt":"hi"}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("raw generate while paused = %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}

	if got := e.requests(t, "ollama", "not_lending") - before; got != 5 {
		t.Errorf("not_lending moved by %v, want 5", got)
	}
	if n := len(g.tap.Conns()); n != 0 {
		t.Fatalf("the gate opened %d connections to Ollama while lending is paused", n)
	}
	if rs := realollama.Requests(e.ollama.Log.Since(mark)); len(rs) != 0 {
		t.Fatalf("requests reached Ollama while lending is paused: %+v", rs)
	}
	if ps := e.ollama.Loaded(t); len(ps) != 0 {
		t.Fatalf("a model is loaded although nothing was lent: %+v", ps)
	}

	// Reads do not use the GPU and pass.
	if _, err := c.List(roCtx(t)); err != nil {
		t.Fatalf("List while paused: %v", err)
	}
	if n := realollama.Count(realollama.Requests(e.ollama.Log.Since(mark)), http.MethodGet, "/api/tags"); n != 1 {
		t.Fatalf("List while paused reached Ollama %d times", n)
	}
}

// The borrower's token never reaches Ollama, presented either way, and
// never appears in either log. A gate with forward_authorization = true is
// the control: its tap does see the token, so the check can see one.
func TestRealOllamaBorrowerTokenNeverReachesOllama(t *testing.T) {
	e := roStart(t, roSetup{gates: []roGate{
		{id: "ollama", management: "deny"},
		{id: "ollama-forward", management: "deny", forwardAuth: true},
	}})
	e.waitLendable(t)
	stream := false
	gen := func(c *ollama.Client) {
		t.Helper()
		err := c.Generate(roCtx(t), &ollama.GenerateRequest{Model: roModel, Prompt: "secret", Stream: &stream,
			Options: map[string]any{"num_predict": 2}}, func(ollama.GenerateResponse) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	gen(e.ollamaClient("ollama"))
	gen(e.ollamaClient("ollama-forward"))
	if _, err := e.ollamaClient("ollama").List(roCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The other header a borrower may use.
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.gate("ollama").addr+"/api/generate",
		strings.NewReader(`{"model":"tiny","prompt":"key","stream":false,"options":{"num_predict":2}}`))
	req.Header.Set("X-Api-Key", e.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("generate with X-Api-Key = %d", resp.StatusCode)
	}

	plain := e.gate("ollama").tap
	ex := plain.Exchanges()
	if len(ex) != 3 {
		t.Fatalf("the gate made %d upstream requests, want 3", len(ex))
	}
	for _, x := range ex {
		if x.Header.Get("Authorization") != "" || x.Header.Get("X-Api-Key") != "" {
			t.Fatalf("%s %s reached Ollama with a credential header (headers %v)", x.Method, x.Path, slices.Sorted(maps.Keys(x.Header)))
		}
	}
	if strings.Contains(string(plain.Sent()), e.token) {
		t.Fatal("the borrower's token reached Ollama")
	}
	fwd := e.gate("ollama-forward").tap
	if !strings.Contains(string(fwd.Sent()), "Bearer "+e.token) {
		t.Fatal("control: the forwarding gate's tap does not show the token it forwarded; the check above would be blind")
	}
	// assertTokenKept (at cleanup) checks both logs.
}
