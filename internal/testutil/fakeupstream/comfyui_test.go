package fakeupstream

import (
	"bytes"
	"encoding/json"
	"image/png"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialComfy(t *testing.T, c *ComfyUI, clientID string) *wsClient {
	t.Helper()
	conn, resp, err := websocket.Dial(waitCtx(t), "ws"+strings.TrimPrefix(c.URL, "http")+"/ws?clientId="+clientID, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade status %d", resp.StatusCode)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	w := &wsClient{t: t, conn: conn}
	if m := w.read(); m.Type != "status" || !strings.Contains(string(m.Data), `"sid":"`+clientID+`"`) {
		t.Fatalf("first message %s %s", m.Type, m.Data)
	}
	return w
}

func (w *wsClient) read() WSMessage {
	w.t.Helper()
	var m WSMessage
	if err := wsjson.Read(waitCtx(w.t), w.conn, &m); err != nil {
		w.t.Fatalf("ws read: %v", err)
	}
	return m
}

// until reads messages up to and including the first for which stop is
// true.
func (w *wsClient) until(stop func(WSMessage) bool) []WSMessage {
	w.t.Helper()
	var out []WSMessage
	for {
		m := w.read()
		out = append(out, m)
		if stop(m) {
			return out
		}
	}
}

func endOf(promptID string) func(WSMessage) bool {
	return func(m WSMessage) bool {
		return m.Type == "executing" && string(m.Data) == `{"node":null,"prompt_id":"`+promptID+`"}`
	}
}

func types(ms []WSMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return out
}

func submit(t *testing.T, c *ComfyUI, path, clientID string, prompt map[string]any) string {
	t.Helper()
	res := do(t, "POST", c.URL+path, map[string]any{"prompt": prompt, "client_id": clientID})
	if res.status != 200 {
		t.Fatalf("submit: %d %s", res.status, res.body)
	}
	got := decode[struct {
		PromptID   string         `json:"prompt_id"`
		Number     int            `json:"number"`
		NodeErrors map[string]any `json:"node_errors"`
	}](t, res.body)
	if len(got.PromptID) != 36 || got.NodeErrors == nil {
		t.Fatalf("submit answer %s", res.body)
	}
	return got.PromptID
}

func TestComfyUIRunAndEventsGoToTheSubmitter(t *testing.T) {
	c := StartComfyUI(t, WithTokens(3))
	a := dialComfy(t, c, "client-a")
	b := dialComfy(t, c, "client-b")

	id := submit(t, c, "/prompt", "client-a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "a cat"))
	msgs := a.until(endOf(id))
	want := []string{"status", "status", "execution_start", "execution_cached",
		"executing", "executing", "executing", "executing", "executing",
		"progress", "progress", "progress", "executing", "executing", "executed",
		"execution_success", "status", "executing"}
	if !slices.Equal(types(msgs), want) {
		t.Fatalf("client a got %v", types(msgs))
	}
	var prog struct {
		Value, Max int
		PromptID   string `json:"prompt_id"`
		Node       string
	}
	if err := json.Unmarshal(msgs[11].Data, &prog); err != nil || prog.Value != 3 || prog.Max != 3 || prog.PromptID != id || prog.Node != "3" {
		t.Fatalf("progress %s", msgs[11].Data)
	}
	var executed struct {
		Node   string
		Output struct {
			Images []struct{ Filename, Subfolder, Type string }
		}
	}
	if err := json.Unmarshal(msgs[14].Data, &executed); err != nil || executed.Node != "9" || len(executed.Output.Images) != 1 {
		t.Fatalf("executed %s", msgs[14].Data)
	}
	img := executed.Output.Images[0]
	if img.Filename != "ComfyUI_00001_.png" || img.Type != "output" {
		t.Fatalf("image %+v", img)
	}

	// The other client saw queue status only.
	b.until(func(m WSMessage) bool {
		return m.Type == "status" && strings.Contains(string(m.Data), `"queue_remaining":0`)
	})
	for _, m := range c.Sent("client-b") {
		if m.Type != "status" {
			t.Fatalf("client b was sent %s %s", m.Type, m.Data)
		}
	}

	ok, err := c.WaitDone(waitCtx(t), id)
	if err != nil || !ok {
		t.Fatalf("done %v %v", ok, err)
	}
	hist := decode[map[string]struct {
		Prompt  []any
		Outputs map[string]any
		Status  struct {
			StatusStr string `json:"status_str"`
			Completed bool
			Messages  [][]any
		}
	}](t, do(t, "GET", c.URL+"/api/history/"+id, nil).body)
	h, found := hist[id]
	if !found || h.Status.StatusStr != "success" || !h.Status.Completed || len(h.Prompt) != 5 || h.Outputs["9"] == nil ||
		len(h.Status.Messages) != 3 {
		t.Fatalf("history %+v", hist)
	}

	view := do(t, "GET", c.URL+"/view?filename="+img.Filename+"&type=output&subfolder=", nil)
	if view.status != 200 || view.header.Get("Content-Type") != "image/png" {
		t.Fatalf("view %d %v", view.status, view.header)
	}
	if _, err := png.Decode(bytes.NewReader(view.body)); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if res := do(t, "GET", c.URL+"/view?filename=nope.png", nil); res.status != 404 {
		t.Fatalf("missing view %d", res.status)
	}
	if res := do(t, "GET", c.URL+"/view?filename=../x.png", nil); res.status != 400 {
		t.Fatalf("traversal view %d", res.status)
	}

	reqs := c.RequestsTo("/ws")
	if len(reqs) != 2 || reqs[0].Query.Get("clientId") != "client-a" {
		t.Fatalf("ws requests %+v", reqs)
	}
	if got := c.Clients(); !slices.Equal(got, []string{"client-a", "client-b"}) {
		t.Fatalf("clients %v", got)
	}
}

func TestComfyUIInterruptAndQueue(t *testing.T) {
	c := StartComfyUI(t, WithTokens(4))
	release := c.Hold()
	t.Cleanup(release)
	a := dialComfy(t, c, "a")

	id1 := submit(t, c, "/api/prompt", "a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "one"))
	id2 := submit(t, c, "/prompt", "a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "two"))
	id3 := submit(t, c, "/prompt", "a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "three"))
	a.until(func(m WSMessage) bool { return m.Type == "progress" })

	q := decode[struct {
		Running [][]any `json:"queue_running"`
		Pending [][]any `json:"queue_pending"`
	}](t, do(t, "GET", c.URL+"/queue", nil).body)
	if len(q.Running) != 1 || q.Running[0][1] != id1 || len(q.Pending) != 2 || q.Pending[0][1] != id2 {
		t.Fatalf("queue %+v", q)
	}
	if got := decode[map[string]any](t, do(t, "GET", c.URL+"/prompt", nil).body); got["exec_info"].(map[string]any)["queue_remaining"] != float64(3) {
		t.Fatalf("queue info %v", got)
	}

	if res := do(t, "POST", c.URL+"/queue", map[string]any{"delete": []string{id3}}); res.status != 200 {
		t.Fatalf("delete %d", res.status)
	}
	if got := c.Pending(); !slices.Equal(got, []string{id2}) {
		t.Fatalf("pending %v", got)
	}
	// A targeted interrupt of a prompt that is not running does nothing.
	do(t, "POST", c.URL+"/interrupt", map[string]any{"prompt_id": id2})
	if res := do(t, "POST", c.URL+"/interrupt", nil); res.status != 200 {
		t.Fatalf("interrupt %d", res.status)
	}
	msgs := a.until(endOf(id1))
	var intr struct {
		PromptID string `json:"prompt_id"`
		NodeID   string `json:"node_id"`
		NodeType string `json:"node_type"`
		Executed []string
	}
	i := slices.IndexFunc(msgs, func(m WSMessage) bool { return m.Type == "execution_interrupted" })
	if i < 0 || json.Unmarshal(msgs[i].Data, &intr) != nil || intr.PromptID != id1 || intr.NodeID != "3" ||
		intr.NodeType != "KSampler" || !slices.Equal(intr.Executed, []string{"5", "4", "7", "6"}) {
		t.Fatalf("messages %v", types(msgs))
	}
	if ok, err := c.WaitDone(waitCtx(t), id1); err != nil || ok {
		t.Fatalf("interrupted prompt done=%v %v", ok, err)
	}
	if got := c.Interrupted(); !slices.Equal(got, []string{id1}) {
		t.Fatalf("interrupted %v", got)
	}
	hist := decode[map[string]map[string]any](t, do(t, "GET", c.URL+"/history?max_items=1", nil).body)
	if st := hist[id1]["status"].(map[string]any); st["status_str"] != "error" || st["completed"] != false {
		t.Fatalf("history %v", hist)
	}

	// The next prompt runs; it waits on the hold too until released.
	a.until(func(m WSMessage) bool { return m.Type == "progress" })
	if c.Running() != id2 {
		t.Fatalf("running %q", c.Running())
	}
	release()
	a.until(endOf(id2))
	if ok, err := c.WaitDone(waitCtx(t), id2); err != nil || !ok {
		t.Fatalf("second prompt %v %v", ok, err)
	}
}

func TestComfyUIValidationAndRoutes(t *testing.T) {
	c := StartComfyUI(t)
	errOf := func(body any) (int, string, map[string]any) {
		res := do(t, "POST", c.URL+"/prompt", body)
		var v struct {
			Error      map[string]any `json:"error"`
			NodeErrors map[string]any `json:"node_errors"`
		}
		_ = json.Unmarshal(res.body, &v)
		typ, _ := v.Error["type"].(string)
		return res.status, typ, v.NodeErrors
	}
	if st, typ, _ := errOf(map[string]any{"client_id": "x"}); st != 400 || typ != "no_prompt" {
		t.Errorf("no prompt: %d %s", st, typ)
	}
	if st, typ, _ := errOf(map[string]any{"prompt": map[string]any{}}); st != 400 || typ != "prompt_no_outputs" {
		t.Errorf("no outputs: %d %s", st, typ)
	}
	if st, typ, _ := errOf(map[string]any{"prompt": map[string]any{"1": map[string]any{"class_type": "Nope", "inputs": map[string]any{}}}}); st != 400 || typ != "invalid_prompt" {
		t.Errorf("unknown node: %d %s", st, typ)
	}
	st, typ, nodeErrs := errOf(map[string]any{"prompt": ComfyTxt2Img("missing.safetensors", "x")})
	if st != 400 || typ != "prompt_outputs_failed_validation" || nodeErrs["4"] == nil {
		t.Errorf("missing checkpoint: %d %s %v", st, typ, nodeErrs)
	}
	if res := do(t, "POST", c.URL+"/prompt", "not json"); res.status != 500 {
		t.Errorf("bad json %d", res.status)
	}

	for _, p := range []string{"/object_info", "/api/object_info/KSampler", "/system_stats", "/embeddings", "/models", "/models/checkpoints", "/features", "/history", "/queue", "/api/queue"} {
		if res := do(t, "GET", c.URL+p, nil); res.status != 200 || !json.Valid(res.body) {
			t.Errorf("GET %s: %d %s", p, res.status, res.body)
		}
	}
	ckpts := decode[[]string](t, do(t, "GET", c.URL+"/models/checkpoints", nil).body)
	if !slices.Equal(ckpts, DefaultComfyCheckpoints) {
		t.Errorf("checkpoints %v", ckpts)
	}
	if res := do(t, "POST", c.URL+"/free", map[string]any{"unload_models": true, "free_memory": true}); res.status != 200 {
		t.Errorf("free %d", res.status)
	}
	if res := do(t, "DELETE", c.URL+"/prompt", nil); res.status != 405 || string(res.body) != "405: Method Not Allowed" {
		t.Errorf("DELETE /prompt %d %q", res.status, res.body)
	}

	upload := func(name string, data []byte) map[string]string {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("image", name)
		_, _ = fw.Write(data)
		_ = mw.WriteField("type", "input")
		_ = mw.Close()
		req, _ := http.NewRequestWithContext(waitCtx(t), "POST", c.URL+"/upload/image", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := upload("in.png", []byte("one")); got["name"] != "in.png" || got["type"] != "input" {
		t.Fatalf("upload %v", got)
	}
	if got := upload("in.png", []byte("two")); got["name"] != "in (1).png" {
		t.Fatalf("second upload %v", got)
	}
	if res := do(t, "GET", c.URL+"/view?filename=in.png&type=input", nil); string(res.body) != "one" {
		t.Fatalf("view upload %q", res.body)
	}
}
