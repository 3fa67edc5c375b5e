package gate_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// wsClient is a borrower's ComfyUI event socket through a gate.
type wsClient struct {
	t    testing.TB
	conn *websocket.Conn
	// sid is the session id ComfyUI reported on connect: the client id
	// after the gate namespaced it.
	sid string
}

// dialWS opens /ws?clientId=clientID through the gate as the borrower
// holding token, and reads the "status" message ComfyUI sends first.
func dialWS(t testing.TB, e *gateEnv, token, clientID string) *wsClient {
	t.Helper()
	conn, resp, err := websocket.Dial(waitCtx(t), "ws://"+e.Addr+"/ws?clientId="+url.QueryEscape(clientID), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		t.Fatalf("dial /ws through the gate: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade status %d", resp.StatusCode)
	}
	conn.SetReadLimit(1 << 20)
	w := &wsClient{t: t, conn: conn}
	t.Cleanup(w.close)
	m := w.read()
	var st struct {
		SID string `json:"sid"`
	}
	if m.Type != "status" || json.Unmarshal(m.Data, &st) != nil || st.SID == "" {
		t.Fatalf("first message %s %s", m.Type, m.Data)
	}
	w.sid = st.SID
	return w
}

func (w *wsClient) close() { _ = w.conn.CloseNow() }

func (w *wsClient) read() fakeupstream.WSMessage {
	w.t.Helper()
	var m fakeupstream.WSMessage
	if err := wsjson.Read(waitCtx(w.t), w.conn, &m); err != nil {
		w.t.Fatalf("ws read: %v", err)
	}
	return m
}

// untilDone reads up to and including the "executing" message with node
// null that ends promptID, ComfyUI's end-of-prompt marker.
func (w *wsClient) untilDone(promptID string) []fakeupstream.WSMessage {
	w.t.Helper()
	var out []fakeupstream.WSMessage
	for {
		m := w.read()
		out = append(out, m)
		if m.Type == "executing" && string(m.Data) == `{"node":null,"prompt_id":"`+promptID+`"}` {
			return out
		}
	}
}

// mentions lists the messages that name promptID.
func mentions(ms []fakeupstream.WSMessage, promptID string) []string {
	var out []string
	for _, m := range ms {
		if strings.Contains(string(m.Data), promptID) {
			out = append(out, m.Type)
		}
	}
	return out
}

// submit queues the txt2img workflow through the gate as the borrower
// holding token; clientID "" sends none.
func submit(t testing.TB, e *gateEnv, token, clientID string) string {
	t.Helper()
	doc := map[string]any{"prompt": fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "a lighthouse")}
	if clientID != "" {
		doc["client_id"] = clientID
	}
	b, _ := json.Marshal(doc)
	res := e.do(t, req{method: "POST", path: "/prompt", token: token, body: b})
	var v struct {
		PromptID string `json:"prompt_id"`
	}
	if res.status != http.StatusOK || json.Unmarshal(res.body, &v) != nil || v.PromptID == "" {
		t.Fatalf("submit: %d %s", res.status, res.body)
	}
	return v.PromptID
}

// TestComfyWebSocketOwnership: borrower A queues a prompt through the gate
// with client id X and receives its execution events on /ws?clientId=X
// through the gate; borrower B, connected with the same client id (and
// with A's namespaced id), receives none of them; B cannot read A's
// history or output files (404 refused_not_owner, nothing reaches
// ComfyUI) while A can.
func TestComfyWebSocketOwnership(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(3))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})

	a := dialWS(t, e, aliceToken, "X")
	b := dialWS(t, e, bobToken, "X")
	if a.sid == b.sid || a.sid == "X" || b.sid == "X" {
		t.Fatalf("client ids not namespaced per borrower: A %q B %q", a.sid, b.sid)
	}
	b2 := dialWS(t, e, bobToken, a.sid) // B tries A's namespaced id outright
	if b2.sid == a.sid {
		t.Fatalf("B took over A's session id %q", a.sid)
	}
	if got := fake.Clients(); len(got) != 3 {
		t.Fatalf("upstream sockets %v", got)
	}

	pid := submit(t, e, aliceToken, "X")
	evA := a.untilDone(pid)
	for _, want := range []string{"execution_start", "executing", "progress", "executed", "execution_success"} {
		if !containsType(evA, want, pid) {
			t.Fatalf("A did not receive %s for its prompt: %v", want, types(evA))
		}
	}
	// B's own prompt is a marker: ComfyUI's worker runs prompts in order
	// and each socket's messages arrive in order, so anything of A's that
	// had gone to B's sockets would arrive before B's own events.
	for _, w := range []*wsClient{b, b2} {
		mine := submit(t, e, bobToken, w.sid) // as B, to that socket's id
		evB := w.untilDone(mine)
		if leak := mentions(evB, pid); len(leak) > 0 {
			t.Fatalf("B's socket %q received A's events: %v", w.sid, leak)
		}
	}
	for _, sid := range []string{b.sid, b2.sid} {
		if leak := mentions(fake.Sent(sid), pid); len(leak) > 0 {
			t.Fatalf("ComfyUI sent A's events to B's session %q: %v", sid, leak)
		}
	}

	// History and outputs: B is refused without reaching ComfyUI; A reads.
	before := fake.Count()
	for _, p := range []string{"/history/" + pid, "/api/history/" + pid} {
		res := e.do(t, req{method: "GET", path: p, token: bobToken})
		if res.status != http.StatusNotFound || errorMessage(t, config.KindComfyUI, res.body, "refused_not_owner") == "" {
			t.Fatalf("B GET %s: %d %s", p, res.status, res.body)
		}
	}
	if fake.Count() != before {
		t.Fatalf("B's history reads reached ComfyUI")
	}
	hist := e.get(t, "/history/"+pid)
	var h map[string]struct {
		Outputs map[string]struct {
			Images []struct{ Filename, Subfolder, Type string } `json:"images"`
		} `json:"outputs"`
	}
	if hist.status != http.StatusOK || json.Unmarshal(hist.body, &h) != nil || len(h[pid].Outputs) == 0 {
		t.Fatalf("A GET /history/%s: %d %s", pid, hist.status, hist.body)
	}
	var view string
	for _, o := range h[pid].Outputs {
		for _, img := range o.Images {
			view = "?" + url.Values{"filename": {img.Filename}, "subfolder": {img.Subfolder}, "type": {img.Type}}.Encode()
		}
	}
	if view == "" {
		t.Fatalf("no output image in %s", hist.body)
	}
	before = fake.Count()
	for _, p := range []string{"/view" + view, "/api/view" + view} {
		res := e.do(t, req{method: "GET", path: p, token: bobToken})
		if res.status != http.StatusNotFound || errorMessage(t, config.KindComfyUI, res.body, "refused_not_owner") == "" {
			t.Fatalf("B GET %s: %d %s", p, res.status, res.body)
		}
	}
	if fake.Count() != before {
		t.Fatalf("B's /view reached ComfyUI")
	}
	for _, p := range []string{"/view" + view, "/api/view" + view} {
		res := e.get(t, p)
		if res.status != http.StatusOK || !strings.HasPrefix(string(res.body), "\x89PNG") {
			t.Fatalf("A GET %s: %d %.40q", p, res.status, res.body)
		}
	}
	e.waitCounter(t, gate.OutcomeNotOwner, 4)
}

// TestComfyPromptWithoutClientID: a prompt queued without a client id
// would have its events broadcast by ComfyUI to every open socket, other
// borrowers' included; the gate gives it a client id in the borrower's
// namespace, so no other borrower receives them.
func TestComfyPromptWithoutClientID(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(2))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	b := dialWS(t, e, bobToken, "listener")

	pid := submit(t, e, aliceToken, "")
	if ok, err := fake.WaitDone(waitCtx(t), pid); err != nil || !ok {
		t.Fatalf("A's prompt did not complete: %v", err)
	}
	mine := submit(t, e, bobToken, "listener")
	if leak := mentions(b.untilDone(mine), pid); len(leak) > 0 {
		t.Fatalf("B received the events of A's prompt queued without a client id: %v", leak)
	}
	r := fake.RequestsTo("/prompt")[0]
	var sent struct {
		ClientID string `json:"client_id"`
	}
	if err := r.JSON(&sent); err != nil || sent.ClientID == "" {
		t.Fatalf("the prompt reached ComfyUI without a client id: %s", r.Body)
	}
	// A can still read its own result.
	if res := e.get(t, "/history/"+pid); res.status != http.StatusOK || !strings.Contains(string(res.body), pid) {
		t.Fatalf("A's history: %d %s", res.status, res.body)
	}
}

// TestComfyPromptIDChosenByBorrower: a borrower cannot name the prompt id
// (which could be the owner's or another borrower's) and so claim it.
func TestComfyPromptIDChosenByBorrower(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(1))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	victim := submit(t, e, aliceToken, "a")
	if _, err := fake.WaitDone(waitCtx(t), victim); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"prompt": fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "x"), "prompt_id": victim})
	res := e.do(t, req{method: "POST", path: "/prompt", token: bobToken, body: b})
	if res.status != http.StatusOK || strings.Contains(string(res.body), victim) {
		t.Fatalf("B's prompt with A's id: %d %s", res.status, res.body)
	}
	if got := e.do(t, req{method: "GET", path: "/history/" + victim, token: bobToken}); got.status != http.StatusNotFound {
		t.Fatalf("B reads A's history after naming its id: %d", got.status)
	}
}

func containsType(ms []fakeupstream.WSMessage, typ, promptID string) bool {
	for _, m := range ms {
		if m.Type == typ && strings.Contains(string(m.Data), promptID) {
			return true
		}
	}
	return false
}

func types(ms []fakeupstream.WSMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return out
}

// outputOf queues a prompt as the borrower holding token, waits for it,
// reads its history through the gate (which records its outputs as that
// borrower's) and returns its output file's name.
func outputOf(t testing.TB, e *gateEnv, fake *fakeupstream.ComfyUI, token string) string {
	t.Helper()
	pid := submit(t, e, token, "files")
	if ok, err := fake.WaitDone(waitCtx(t), pid); err != nil || !ok {
		t.Fatalf("prompt %s did not complete: %v", pid, err)
	}
	res := e.do(t, req{method: "GET", path: "/history/" + pid, token: token})
	var h map[string]struct {
		Outputs map[string]struct {
			Images []struct{ Filename string } `json:"images"`
		} `json:"outputs"`
	}
	if res.status != http.StatusOK || json.Unmarshal(res.body, &h) != nil {
		t.Fatalf("history: %d %s", res.status, res.body)
	}
	for _, o := range h[pid].Outputs {
		for _, img := range o.Images {
			return img.Filename
		}
	}
	t.Fatalf("no output in %s", res.body)
	return ""
}

// TestComfyViewQueryForwardedAsChecked: /view reaches ComfyUI with exactly
// the file the gate checked, one value of each key, so that no difference
// between Go's query parser and ComfyUI's (duplicates, pairs one of them
// drops) lets a borrower read a file it does not own.
func TestComfyViewQueryForwardedAsChecked(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(1))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	fileA := outputOf(t, e, fake, aliceToken)
	fileB := outputOf(t, e, fake, bobToken)
	for _, c := range []struct {
		token, query, want string
	}{
		{bobToken, "filename=" + url.QueryEscape(fileA) + ";&filename=" + url.QueryEscape(fileB) + "&type=output", fileB},
		{bobToken, "filename=" + url.QueryEscape(fileB) + "&filename=" + url.QueryEscape(fileA) + "&type=output&type=output", fileB},
		{aliceToken, "filename=" + url.QueryEscape(fileA) + "&filename=" + url.QueryEscape(fileB) + "&subfolder=&subfolder=x", fileA},
	} {
		res := e.do(t, req{method: "GET", path: "/view?" + c.query, token: c.token})
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.query, res.status, res.body)
		}
		got, _ := fake.Last()
		if got.Path != "/view" || len(got.Query["filename"]) != 1 || got.Query.Get("filename") != c.want ||
			len(got.Query["type"]) != 1 || len(got.Query["subfolder"]) != 1 || strings.Contains(got.RawQuery, ";") {
			t.Fatalf("%s reached ComfyUI as %q, want only %s", c.query, got.RawQuery, c.want)
		}
	}
}

// A borrower cannot jump ComfyUI's queue ahead of the owner's prompts:
// "front" and "number" never reach the upstream.
func TestComfyPromptCannotJumpTheQueue(t *testing.T) {
	fake := fakeupstream.StartComfyUI(t, fakeupstream.WithTokens(1))
	e := startGate(t, gateConfig{kind: config.KindComfyUI, target: fake.URL})
	b, _ := json.Marshal(map[string]any{"prompt": fakeupstream.ComfyTxt2Img(fakeupstream.DefaultComfyCheckpoints[0], "x"), "front": true, "number": -5})
	if res := e.do(t, req{method: "POST", path: "/prompt", token: bobToken, body: b}); res.status != http.StatusOK {
		t.Fatalf("prompt: %d %s", res.status, res.body)
	}
	got, ok := fake.Last()
	if !ok || got.Path != "/prompt" {
		t.Fatalf("last request %+v", got)
	}
	var sent map[string]any
	if err := got.JSON(&sent); err != nil {
		t.Fatal(err)
	}
	if _, ok := sent["front"]; ok {
		t.Fatalf("front reached ComfyUI: %s", got.Body)
	}
	if _, ok := sent["number"]; ok {
		t.Fatalf("number reached ComfyUI: %s", got.Body)
	}
}
