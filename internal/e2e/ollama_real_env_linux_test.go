//go:build linux

package e2e

// Starting vacancyd in front of the real Ollama, and the clients that talk
// to its gates.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vacancyd/vacancyd/internal/testutil/gguf"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

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
