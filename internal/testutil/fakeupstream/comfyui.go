package fakeupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// DefaultComfyCheckpoints are the checkpoint files a ComfyUI fake has
// without WithModels.
var DefaultComfyCheckpoints = []string{"sd_xl_base_1.0.safetensors", "v1-5-pruned-emaonly.safetensors"}

// ComfyUI fakes a ComfyUI server: a prompt queue run by one worker, the
// history, output images, and the /ws event stream.
type ComfyUI struct {
	*Server

	checkpoints []string

	mu         sync.Mutex
	number     int
	seq        int
	pending    []*comfyPrompt
	running    *comfyPrompt
	history    map[string]*comfyHistory
	histOrder  []string
	files      map[string][]byte
	sockets    map[string]*comfySocket
	interrupts []string
	sent       map[string][]WSMessage
	counter    int
	lastNode   any
	clientID   string
	wake       chan struct{}
}

type comfyPrompt struct {
	number    pyNumber
	seq       int
	id        string
	prompt    map[string]any
	extra     map[string]any
	outputs   []string
	clientID  string
	interrupt chan struct{}
	stopOnce  sync.Once
}

func (p *comfyPrompt) item() []any {
	return []any{p.number, p.id, p.prompt, p.extra, p.outputs}
}

func (p *comfyPrompt) stop() { p.stopOnce.Do(func() { close(p.interrupt) }) }

type comfyHistory struct {
	Prompt  []any          `json:"prompt"`
	Outputs map[string]any `json:"outputs"`
	Status  comfyStatus    `json:"status"`
	Meta    map[string]any `json:"meta"`
}

type comfyStatus struct {
	StatusStr string  `json:"status_str"`
	Completed bool    `json:"completed"`
	Messages  [][]any `json:"messages"`
}

// pyNumber is a queue number as Python's json writes it: the server's own
// counter is an int, a client's "number" goes through float().
type pyNumber struct {
	v     float64
	float bool
}

func (n pyNumber) MarshalJSON() ([]byte, error) {
	if !n.float {
		return []byte(strconv.FormatInt(int64(n.v), 10)), nil
	}
	s := strconv.FormatFloat(n.v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return []byte(s), nil
}

type comfySocket struct {
	sid  string
	conn *websocket.Conn
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func (s *comfySocket) close() {
	s.once.Do(func() {
		close(s.done)
		_ = s.conn.CloseNow()
	})
}

// StartComfyUI starts a ComfyUI fake on a loopback port.
func StartComfyUI(t testing.TB, opts ...Option) *ComfyUI {
	t.Helper()
	c := &ComfyUI{
		Server:  newServer(KindComfyUI, opts),
		history: map[string]*comfyHistory{},
		files:   map[string][]byte{},
		sockets: map[string]*comfySocket{},
		sent:    map[string][]WSMessage{},
		wake:    make(chan struct{}, 1),
	}
	if c.cfg.version == "" {
		c.cfg.version = "0.3.60"
	}
	c.checkpoints = c.cfg.models
	if len(c.checkpoints) == 0 {
		c.checkpoints = DefaultComfyCheckpoints
	}
	c.unauth = func(w http.ResponseWriter, r *http.Request) {
		c.challenge(w)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "401: Unauthorized")
	}
	c.handler = c.routes()
	c.onClose(c.closeSockets)
	c.inflight.Add(1)
	go c.worker()
	c.listen(t)
	return c
}

func (c *ComfyUI) closeSockets() {
	c.mu.Lock()
	socks := make([]*comfySocket, 0, len(c.sockets))
	for _, s := range c.sockets {
		socks = append(socks, s)
	}
	c.mu.Unlock()
	for _, s := range socks {
		s.close()
	}
}

func (c *ComfyUI) routes() http.Handler {
	rt := &router{
		autoHead: true,
		notFound: func(w http.ResponseWriter, r *http.Request) {
			aiohttpText(w, http.StatusNotFound, "404: Not Found")
		},
		notAllowed: func(w http.ResponseWriter, r *http.Request) {
			aiohttpText(w, http.StatusMethodNotAllowed, "405: Method Not Allowed")
		},
	}
	add := func(method, path string, h http.HandlerFunc) {
		rt.handle(method, path, h)
		rt.handle(method, "/api"+path, h)
	}
	add("GET", "/ws", c.ws)
	add("GET", "/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = io.WriteString(w, "<!DOCTYPE html><html><head><title>ComfyUI</title></head><body></body></html>")
	})
	add("GET", "/embeddings", func(w http.ResponseWriter, r *http.Request) { comfyJSON(w, http.StatusOK, []string{}) })
	add("GET", "/models", func(w http.ResponseWriter, r *http.Request) { comfyJSON(w, http.StatusOK, comfyFolders) })
	add("GET", "/models/{folder}", c.modelFolder)
	add("GET", "/extensions", func(w http.ResponseWriter, r *http.Request) { comfyJSON(w, http.StatusOK, []string{}) })
	add("POST", "/upload/image", c.uploadImage)
	add("GET", "/view", c.view)
	add("GET", "/system_stats", c.systemStats)
	add("GET", "/features", func(w http.ResponseWriter, r *http.Request) {
		comfyJSON(w, http.StatusOK, map[string]any{"supports_preview_metadata": true, "max_upload_size": 104857600})
	})
	add("GET", "/prompt", func(w http.ResponseWriter, r *http.Request) { comfyJSON(w, http.StatusOK, c.queueInfo()) })
	add("GET", "/object_info", func(w http.ResponseWriter, r *http.Request) { comfyJSON(w, http.StatusOK, c.objectInfo()) })
	add("GET", "/object_info/{node_class}", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]any{}
		if info, ok := c.objectInfo()[r.PathValue("node_class")]; ok {
			out[r.PathValue("node_class")] = info
		}
		comfyJSON(w, http.StatusOK, out)
	})
	add("GET", "/history", c.getHistory)
	add("GET", "/history/{prompt_id}", c.getHistoryID)
	add("GET", "/queue", c.getQueue)
	add("POST", "/prompt", c.postPrompt)
	add("POST", "/queue", c.postQueue)
	add("POST", "/interrupt", c.postInterrupt)
	add("POST", "/free", c.postFree)
	add("POST", "/history", c.postHistory)
	return rt
}

func aiohttpText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// comfyJSON is aiohttp's web.json_response.
func comfyJSON(w http.ResponseWriter, status int, v any) {
	writeJSON(w, status, "application/json; charset=utf-8", v)
}

// comfyOK is an empty web.Response(status=200).
func comfyOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// requestJSON is aiohttp's request.json(): a body that is not JSON raises,
// which aiohttp answers with a bare 500.
func requestJSON(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		aiohttpText(w, http.StatusInternalServerError, "500 Internal Server Error\n\nServer got itself in trouble")
		return nil, false
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, true
}

// Clients lists the client ids with an open /ws.
func (c *ComfyUI) Clients() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for sid := range c.sockets {
		out = append(out, sid)
	}
	sort.Strings(out)
	return out
}

// Interrupted lists the prompt ids /interrupt stopped, oldest first.
func (c *ComfyUI) Interrupted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.interrupts...)
}

// Running is the id of the prompt being executed, or "".
func (c *ComfyUI) Running() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return ""
	}
	return c.running.id
}

// Pending lists the queued prompt ids in run order.
func (c *ComfyUI) Pending() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.sortedPendingLocked() {
		out = append(out, p.id)
	}
	return out
}

// WaitDone waits until the prompt has a history entry, or ctx ends; it
// reports whether the prompt completed successfully.
func (c *ComfyUI) WaitDone(ctx context.Context, promptID string) (bool, error) {
	var ok bool
	err := c.waitFor(ctx, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		h := c.history[promptID]
		if h != nil {
			ok = h.Status.Completed
		}
		return h != nil
	})
	return ok, err
}

// ComfyTxt2Img is the default text-to-image workflow in API format
// (ComfyUI's example: checkpoint, two prompts, empty latent, KSampler,
// VAE decode, SaveImage), ready to send as {"prompt": ...}.
func ComfyTxt2Img(checkpoint, text string) map[string]any {
	return map[string]any{
		"3": map[string]any{"class_type": "KSampler", "inputs": map[string]any{
			"seed": 156680208700286, "steps": 20, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
			"model": []any{"4", 0}, "positive": []any{"6", 0}, "negative": []any{"7", 0}, "latent_image": []any{"5", 0}}},
		"4": map[string]any{"class_type": "CheckpointLoaderSimple", "inputs": map[string]any{"ckpt_name": checkpoint}},
		"5": map[string]any{"class_type": "EmptyLatentImage", "inputs": map[string]any{"width": 512, "height": 512, "batch_size": 1}},
		"6": map[string]any{"class_type": "CLIPTextEncode", "inputs": map[string]any{"text": text, "clip": []any{"4", 1}}},
		"7": map[string]any{"class_type": "CLIPTextEncode", "inputs": map[string]any{"text": "text, watermark", "clip": []any{"4", 1}}},
		"8": map[string]any{"class_type": "VAEDecode", "inputs": map[string]any{"samples": []any{"3", 0}, "vae": []any{"4", 2}}},
		"9": map[string]any{"class_type": "SaveImage", "inputs": map[string]any{"filename_prefix": "ComfyUI", "images": []any{"8", 0}}},
	}
}
