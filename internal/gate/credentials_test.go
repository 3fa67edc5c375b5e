package gate_test

import (
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

func bearerCredential() *config.Credential {
	return &config.Credential{Scheme: "bearer", ValueEnv: "TEST_UPSTREAM_SECRET", Secret: config.NewSecret(upstreamSecret)}
}

func basicCredential(user string) *config.Credential {
	return &config.Credential{Scheme: "basic", Username: user, ValueEnv: "TEST_UPSTREAM_SECRET", Secret: config.NewSecret(upstreamSecret)}
}

var basicValue = "Basic " + base64.StdEncoding.EncodeToString([]byte("vacancyd:"+upstreamSecret))

// secretForms are the ways the upstream credential could leak.
var secretForms = []string{upstreamSecret, base64.StdEncoding.EncodeToString([]byte("vacancyd:" + upstreamSecret))}

func assertNoSecret(t testing.TB, where, text string) {
	t.Helper()
	for _, s := range append(secretForms, aliceToken, bobToken) {
		if strings.Contains(text, s) {
			t.Errorf("%s contains a secret (%.12s...)", where, s)
		}
	}
}

// TestCredentialReplacesBorrowerToken: on a gate whose upstream has a
// bearer credential (llama.cpp --api-key), every forwarded request carries
// the upstream credential and never the borrower's token, whether the
// borrower sent it as Authorization or X-Api-Key. The fake refuses any
// request without the credential, so the answers prove it too.
func TestCredentialReplacesBorrowerToken(t *testing.T) {
	fake := fakeupstream.StartOpenAI(t, fakeupstream.WithBearer(upstreamSecret))
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL, credential: bearerCredential()})
	chat := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for _, apiKey := range []bool{false, true} {
		for _, r := range []req{
			{method: "POST", path: "/v1/chat/completions", body: chat},
			{method: "GET", path: "/slots"}, // /slots needs the key on llama.cpp; management here
			{method: "GET", path: "/v1/models"},
		} {
			r.token, r.apiKey = aliceToken, apiKey
			res := e.do(t, r)
			if r.path == "/slots" {
				if res.status != http.StatusForbidden {
					t.Fatalf("/slots: %d", res.status)
				}
				assertNoSecret(t, "a refusal body", string(res.body))
				continue
			}
			if res.status != http.StatusOK {
				t.Fatalf("%s %s (X-Api-Key %v): %d %s", r.method, r.path, apiKey, res.status, res.body)
			}
			assertNoSecret(t, "an answer", string(res.body))
			assertNoSecret(t, "answer headers", strings.Join(flatten(res.header), "\n"))
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests reached the fake, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer "+upstreamSecret {
			t.Errorf("%s: Authorization %q, want the upstream credential", r.Path, r.Header.Get("Authorization"))
		}
		if r.Header.Get("X-Api-Key") != "" {
			t.Errorf("%s: X-Api-Key reached the upstream", r.Path)
		}
	}
	assertNoSecret(t, "the gate's log", e.Log.String())
}

// TestBasicCredentialWithOllamaClient: a basic credential (a service behind
// HTTP basic authentication) is presented on every forwarded request; the
// Ollama client works through the gate with its own borrow token.
func TestBasicCredentialWithOllamaClient(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithBasicAuth("vacancyd", upstreamSecret))
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, credential: basicCredential("vacancyd")})
	c := ollamaClient(t, e, aliceToken)
	if _, err := c.List(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Generate(waitCtx(t), generateReq("hi"), ignoreGenerate); err != nil {
		t.Fatal(err)
	}
	for _, r := range fake.Requests() {
		if r.Header.Get("Authorization") != basicValue || r.Status != http.StatusOK {
			t.Errorf("%s: Authorization %q status %d", r.Path, r.Header.Get("Authorization"), r.Status)
		}
	}
	if fake.Count() != 2 {
		t.Fatalf("%d requests reached the fake", fake.Count())
	}
	assertNoSecret(t, "the gate's log", e.Log.String())
}

// TestCredentialOnWebSocketUpgrade: the ComfyUI event socket's upgrade
// carries the upstream credential (the fake refuses the upgrade without
// it) and not the borrower's token.
func TestCredentialOnWebSocketUpgrade(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithBearer(upstreamSecret))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL, credential: bearerCredential()})
	ws := dialWS(t, e, aliceToken, "cred")
	ws.close()
	// The fake records the upgrade's status once its socket has closed.
	if err := fake.WaitIdle(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	ups := fake.RequestsTo("/ws")
	if len(ups) != 1 {
		t.Fatalf("%d upgrades reached the fake", len(ups))
	}
	if got := ups[0].Header.Get("Authorization"); got != "Bearer "+upstreamSecret {
		t.Fatalf("upgrade Authorization %q", got)
	}
	if ups[0].Status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", ups[0].Status)
	}
	// Without the gate's credential the fake refuses, so the test above
	// can fail: a gate with no credential gets 401 from the upstream.
	bare := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	_, resp, err := websocket.Dial(waitCtx(t), "ws://"+bare.Addr+"/ws?clientId=x", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + aliceToken}},
	})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upgrade without the upstream credential: %v %v", err, resp)
	}
	assertNoSecret(t, "the gate's log", e.Log.String()+bare.Log.String())
}

// TestForwardAuthorization: with forward_authorization = true (and no
// credential) the borrower's own Authorization and X-Api-Key reach the
// upstream, for an upstream that checks the same keys.
func TestForwardAuthorization(t *testing.T) {
	fake := fakeupstream.StartOpenAI(t, fakeupstream.WithBearer(aliceToken))
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL, forwardAuth: true})
	chat := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for _, apiKey := range []bool{false, true} {
		res := e.do(t, req{method: "POST", path: "/v1/chat/completions", body: chat, token: aliceToken, apiKey: apiKey})
		if res.status != http.StatusOK {
			t.Fatalf("X-Api-Key %v: %d %s", apiKey, res.status, res.body)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+aliceToken || reqs[1].Header.Get("X-Api-Key") != aliceToken {
		t.Fatalf("forwarded headers: %v / %v", reqs[0].Header, reqs[1].Header)
	}
}

// TestCredentialNeverInErrorsOrLogs: refusals of every kind and the 502 of
// an unreachable upstream carry no credential, and neither does any log
// line, at debug level.
func TestCredentialNeverInErrorsOrLogs(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			fake := fakeupstream.Start(t, fakeupstream.Kind(kind), fakeupstream.WithBearer(upstreamSecret))
			live := startGate(t, gateConfig{kind: kind, target: fake.URL, credential: bearerCredential()})
			dead := startGate(t, gateConfig{kind: kind, target: deadTarget(t), credential: basicCredential("vacancyd")})
			var bodies []string
			for _, e := range []*gateEnv{live, dead} {
				for _, r := range []req{
					{method: "GET", path: "/not-a-listed-read", token: aliceToken},
					{method: "POST", path: "/nothing", token: aliceToken, body: []byte(`{}`)},
					{method: "GET", path: "/not-a-listed-read", token: upstreamSecret},
					{method: "GET", path: "/not-a-listed-read"},
				} {
					bodies = append(bodies, string(e.do(t, r).body))
				}
				e.Switches.Pause(lendingPauser)
				bodies = append(bodies, string(e.do(t, inferenceReq(kind)).body))
				e.Switches.Resume()
				e.waitLendable(t)
			}
			res := dead.do(t, inferenceReq(kind))
			if res.status != http.StatusBadGateway {
				t.Fatalf("dead upstream: %d %s", res.status, res.body)
			}
			bodies = append(bodies, string(res.body))
			for _, b := range bodies {
				assertNoSecret(t, "an error body", b)
			}
			assertNoSecret(t, "the gate's log", live.Log.String()+dead.Log.String())
			dead.waitCounter(t, gate.OutcomeUpstreamError, 1)
		})
	}
}

func flatten(h http.Header) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k+": "+strings.Join(vs, ", "))
	}
	return out
}

// deadTarget is the URL of a port that refuses connections.
func deadTarget(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}
