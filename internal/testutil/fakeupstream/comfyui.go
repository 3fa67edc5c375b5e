package fakeupstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

var comfyFolders = []string{"checkpoints", "loras", "vae", "text_encoders", "diffusion_models",
	"clip_vision", "style_models", "embeddings", "diffusers", "vae_approx", "controlnet",
	"gligen", "upscale_models", "hypernetworks", "photomaker", "classifiers", "model_patches", "audio_encoders"}

func (c *ComfyUI) modelFolder(w http.ResponseWriter, r *http.Request) {
	folder := r.PathValue("folder")
	if !slices.Contains(comfyFolders, folder) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	files := []string{}
	switch folder {
	case "checkpoints":
		files = append(files, c.checkpoints...)
	case "vae":
		files = append(files, "sdxl_vae.safetensors")
	}
	comfyJSON(w, http.StatusOK, files)
}

// Node classes the fake knows: class -> (output node, sampler).
var comfyNodes = map[string]struct {
	output, sampler bool
	category        string
	in              map[string]any
	out             []string
}{
	"CheckpointLoaderSimple": {category: "loaders", in: map[string]any{"ckpt_name": nil}, out: []string{"MODEL", "CLIP", "VAE"}},
	"CLIPTextEncode":         {category: "conditioning", in: map[string]any{"text": []any{"STRING", map[string]any{"multiline": true}}, "clip": []any{"CLIP"}}, out: []string{"CONDITIONING"}},
	"EmptyLatentImage": {category: "latent", in: map[string]any{
		"width":      []any{"INT", map[string]any{"default": 512, "min": 16, "max": 16384, "step": 8}},
		"height":     []any{"INT", map[string]any{"default": 512, "min": 16, "max": 16384, "step": 8}},
		"batch_size": []any{"INT", map[string]any{"default": 1, "min": 1, "max": 4096}}}, out: []string{"LATENT"}},
	"KSampler": {sampler: true, category: "sampling", in: map[string]any{
		"model": []any{"MODEL"}, "seed": []any{"INT", map[string]any{"default": 0, "min": 0, "max": 18446744073709551615.0}},
		"steps":        []any{"INT", map[string]any{"default": 20, "min": 1, "max": 10000}},
		"cfg":          []any{"FLOAT", map[string]any{"default": 8.0, "min": 0.0, "max": 100.0}},
		"sampler_name": []any{[]string{"euler", "euler_ancestral", "dpmpp_2m"}},
		"scheduler":    []any{[]string{"normal", "karras", "simple"}},
		"positive":     []any{"CONDITIONING"}, "negative": []any{"CONDITIONING"}, "latent_image": []any{"LATENT"},
		"denoise": []any{"FLOAT", map[string]any{"default": 1.0, "min": 0.0, "max": 1.0}}}, out: []string{"LATENT"}},
	"KSamplerAdvanced": {sampler: true, category: "sampling", in: map[string]any{"model": []any{"MODEL"}}, out: []string{"LATENT"}},
	"VAEDecode":        {category: "latent", in: map[string]any{"samples": []any{"LATENT"}, "vae": []any{"VAE"}}, out: []string{"IMAGE"}},
	"VAEEncode":        {category: "latent", in: map[string]any{"pixels": []any{"IMAGE"}, "vae": []any{"VAE"}}, out: []string{"LATENT"}},
	"LoadImage":        {category: "image", in: map[string]any{"image": []any{[]string{}, map[string]any{"image_upload": true}}}, out: []string{"IMAGE", "MASK"}},
	"SaveImage": {output: true, category: "image", in: map[string]any{"images": []any{"IMAGE"},
		"filename_prefix": []any{"STRING", map[string]any{"default": "ComfyUI"}}}},
	"PreviewImage": {output: true, category: "image", in: map[string]any{"images": []any{"IMAGE"}}},
}

func (c *ComfyUI) objectInfo() map[string]any {
	out := map[string]any{}
	for name, n := range comfyNodes {
		in := map[string]any{}
		var order []string
		for k, v := range n.in {
			if k == "ckpt_name" {
				v = []any{append([]string(nil), c.checkpoints...)}
			}
			in[k] = v
			order = append(order, k)
		}
		sort.Strings(order)
		outs := n.out
		if outs == nil {
			outs = []string{}
		}
		isList := make([]bool, len(outs))
		out[name] = map[string]any{
			"input": map[string]any{"required": in}, "input_order": map[string]any{"required": order},
			"output": outs, "output_is_list": isList, "output_name": outs, "name": name, "display_name": name,
			"description": "", "python_module": "nodes", "category": n.category, "output_node": n.output,
		}
	}
	return out
}

func (c *ComfyUI) systemStats(w http.ResponseWriter, r *http.Request) {
	comfyJSON(w, http.StatusOK, map[string]any{
		"system": map[string]any{
			"os": "posix", "ram_total": int64(67108864000), "ram_free": int64(51539607552),
			"comfyui_version": c.cfg.version, "required_frontend_version": "1.26.13",
			"python_version":  "3.12.3 (main, Aug 14 2025, 17:47:21) [GCC 13.3.0]",
			"pytorch_version": "2.8.0+cu128", "embedded_python": false, "argv": []string{"main.py", "--listen", "127.0.0.1"},
		},
		"devices": []map[string]any{{
			"name": "cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync", "type": "cuda", "index": 0,
			"vram_total": int64(25386352640), "vram_free": int64(24012914688),
			"torch_vram_total": int64(0), "torch_vram_free": int64(0),
		}},
	})
}

// queueInfo is get_queue_info: the prompts left, running one included.
func (c *ComfyUI) queueInfo() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queueInfoLocked()
}

func (c *ComfyUI) queueInfoLocked() map[string]any {
	n := len(c.pending)
	if c.running != nil {
		n++
	}
	return map[string]any{"exec_info": map[string]any{"queue_remaining": n}}
}

func (c *ComfyUI) getQueue(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	running := []any{}
	if c.running != nil {
		running = append(running, c.running.item())
	}
	pending := []any{}
	for _, p := range c.sortedPendingLocked() {
		pending = append(pending, p.item())
	}
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, map[string]any{"queue_running": running, "queue_pending": pending})
}

func (c *ComfyUI) sortedPendingLocked() []*comfyPrompt {
	ps := append([]*comfyPrompt(nil), c.pending...)
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].number.v != ps[j].number.v {
			return ps[i].number.v < ps[j].number.v
		}
		return ps[i].seq < ps[j].seq
	})
	return ps
}

// comfyErr is one error dict of execution.validate_prompt.
func comfyErr(typ, msg, details string) map[string]any {
	return map[string]any{"type": typ, "message": msg, "details": details, "extra_info": map[string]any{}}
}

func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// validate is execution.validate_prompt, for the node classes the fake
// knows; it returns the output nodes, or the error and node_errors.
func (c *ComfyUI) validate(prompt map[string]any) ([]string, map[string]any, map[string]any) {
	ids := sortedKeys(prompt)
	var outputs []string
	for _, id := range ids {
		node, _ := prompt[id].(map[string]any)
		ct, ok := node["class_type"].(string)
		if !ok {
			return nil, comfyErr("invalid_prompt", "Cannot execute because a node is missing the class_type property.", fmt.Sprintf("Node ID '#%s'", id)), map[string]any{}
		}
		info, ok := comfyNodes[ct]
		if !ok {
			return nil, comfyErr("invalid_prompt", fmt.Sprintf("Cannot execute because node %s does not exist.", ct), fmt.Sprintf("Node ID '#%s'", id)), map[string]any{}
		}
		if info.output {
			outputs = append(outputs, id)
		}
	}
	if len(outputs) == 0 {
		return nil, comfyErr("prompt_no_outputs", "Prompt has no outputs", ""), map[string]any{}
	}
	nodeErrors := map[string]any{}
	var lines []string
	for _, id := range ids {
		node := prompt[id].(map[string]any)
		if node["class_type"] != "CheckpointLoaderSimple" {
			continue
		}
		inputs, _ := node["inputs"].(map[string]any)
		name, ok := inputs["ckpt_name"].(string)
		if !ok || slices.Contains(c.checkpoints, name) {
			continue
		}
		details := fmt.Sprintf("ckpt_name: '%s' not in %s", name, pyList(c.checkpoints))
		nodeErrors[id] = map[string]any{
			"errors": []any{map[string]any{"type": "value_not_in_list", "message": "Value not in list", "details": details,
				"extra_info": map[string]any{"input_name": "ckpt_name", "input_config": []any{c.checkpoints}, "received_value": name}}},
			"dependent_outputs": outputs, "class_type": "CheckpointLoaderSimple",
		}
		lines = append(lines, "Value not in list: "+details)
	}
	if len(nodeErrors) > 0 {
		return nil, comfyErr("prompt_outputs_failed_validation", "Prompt outputs failed validation", strings.Join(lines, "\n")), nodeErrors
	}
	return outputs, nil, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, errA := strconv.Atoi(keys[i])
		b, errB := strconv.Atoi(keys[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return keys[i] < keys[j]
	})
	return keys
}

// executionOrder lists the nodes the outputs need, each after its inputs.
func executionOrder(prompt map[string]any, outputs []string) []string {
	var order []string
	seen := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		node, _ := prompt[id].(map[string]any)
		inputs, _ := node["inputs"].(map[string]any)
		for _, k := range sortedKeys(inputs) {
			if link, ok := inputs[k].([]any); ok && len(link) == 2 {
				if src, ok := link[0].(string); ok {
					if _, exists := prompt[src]; exists {
						visit(src)
					}
				}
			}
		}
		order = append(order, id)
	}
	for _, o := range outputs {
		visit(o)
	}
	return order
}

func (c *ComfyUI) postPrompt(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	var number pyNumber
	if v, ok := data["number"]; ok {
		f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
		number = pyNumber{v: f, float: true}
	} else {
		number = pyNumber{v: float64(c.number)}
		if front, _ := data["front"].(bool); front {
			number.v = -number.v
		}
		c.number++
	}
	c.mu.Unlock()

	rawPrompt, has := data["prompt"]
	if !has {
		comfyJSON(w, http.StatusBadRequest, map[string]any{"error": comfyErr("no_prompt", "No prompt provided", "No prompt provided"), "node_errors": map[string]any{}})
		return
	}
	prompt, ok := rawPrompt.(map[string]any)
	if !ok {
		comfyJSON(w, http.StatusBadRequest, map[string]any{"error": comfyErr("invalid_prompt", "Invalid prompt", "Prompt must be an object"), "node_errors": map[string]any{}})
		return
	}
	outputs, verr, nodeErrors := c.validate(prompt)
	if verr != nil {
		comfyJSON(w, http.StatusBadRequest, map[string]any{"error": verr, "node_errors": nodeErrors})
		return
	}
	extra := map[string]any{}
	if e, ok := data["extra_data"].(map[string]any); ok {
		extra = e
	}
	clientID := ""
	if cid, ok := data["client_id"]; ok {
		extra["client_id"] = cid
		clientID, _ = cid.(string)
	}
	id := newUUID()
	if pid, ok := data["prompt_id"].(string); ok && pid != "" {
		id = pid
	}
	p := &comfyPrompt{number: number, id: id, prompt: prompt, extra: extra, outputs: outputs,
		clientID: clientID, interrupt: make(chan struct{})}
	c.mu.Lock()
	c.seq++
	p.seq = c.seq
	c.pending = append(c.pending, p)
	status := c.queueInfoLocked()
	c.mu.Unlock()
	c.send("", "status", map[string]any{"status": status}, true)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	comfyJSON(w, http.StatusOK, map[string]any{"prompt_id": id, "number": number, "node_errors": map[string]any{}})
}

func (c *ComfyUI) postQueue(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	if c.cfg.stubborn {
		comfyOK(w) // accepted, and ignored (WithRefuseToStop)
		return
	}
	c.mu.Lock()
	changed := false
	if clear, _ := data["clear"].(bool); clear {
		changed = len(c.pending) > 0
		c.pending = nil
	}
	if del, ok := data["delete"].([]any); ok {
		for _, d := range del {
			id, _ := d.(string)
			c.pending = slices.DeleteFunc(c.pending, func(p *comfyPrompt) bool {
				if p.id == id {
					changed = true
					return true
				}
				return false
			})
		}
	}
	status := c.queueInfoLocked()
	c.mu.Unlock()
	if changed {
		c.send("", "status", map[string]any{"status": status}, true)
	}
	comfyOK(w)
}

func (c *ComfyUI) postInterrupt(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var data map[string]any
	if json.Unmarshal(body, &data) != nil || data == nil {
		data = map[string]any{}
	}
	target, _ := data["prompt_id"].(string)
	if c.cfg.stubborn {
		comfyOK(w) // accepted, and ignored (WithRefuseToStop)
		return
	}
	c.mu.Lock()
	p := c.running
	if p != nil && (target == "" || p.id == target) {
		c.interrupts = append(c.interrupts, p.id)
	} else {
		p = nil
	}
	c.mu.Unlock()
	if p != nil {
		p.stop()
	}
	comfyOK(w)
}

func (c *ComfyUI) postFree(w http.ResponseWriter, r *http.Request) {
	if _, ok := requestJSON(w, r); !ok {
		return
	}
	comfyOK(w)
}

func (c *ComfyUI) postHistory(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	if clear, _ := data["clear"].(bool); clear {
		c.history = map[string]*comfyHistory{}
		c.histOrder = nil
	}
	if del, ok := data["delete"].([]any); ok {
		for _, d := range del {
			id, _ := d.(string)
			delete(c.history, id)
			c.histOrder = slices.DeleteFunc(c.histOrder, func(h string) bool { return h == id })
		}
	}
	c.mu.Unlock()
	comfyOK(w)
}

func (c *ComfyUI) getHistory(w http.ResponseWriter, r *http.Request) {
	maxItems := -1
	if s := r.URL.Query().Get("max_items"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			aiohttpText(w, http.StatusBadRequest, "max_items must be an integer")
			return
		}
		maxItems = n
	}
	c.mu.Lock()
	ids := c.histOrder
	if maxItems >= 0 && maxItems < len(ids) {
		ids = ids[len(ids)-maxItems:]
	}
	out := map[string]any{}
	for _, id := range ids {
		out[id] = c.history[id]
	}
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, out)
}

func (c *ComfyUI) getHistoryID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("prompt_id")
	c.mu.Lock()
	out := map[string]any{}
	if h, ok := c.history[id]; ok {
		out[id] = h
	}
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, out)
}

func fileKey(typ, subfolder, name string) string { return typ + "\x00" + subfolder + "\x00" + name }

func (c *ComfyUI) view(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("filename") {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	name := q.Get("filename")
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	typ := q.Get("type")
	if typ == "" {
		typ = "output"
	}
	if typ != "output" && typ != "input" && typ != "temp" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if strings.Contains(q.Get("subfolder"), "..") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	c.mu.Lock()
	b, ok := c.files[fileKey(typ, q.Get("subfolder"), name)]
	c.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	ct := "application/octet-stream"
	if strings.HasSuffix(strings.ToLower(name), ".png") {
		ct = "image/png"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", `filename="`+name+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (c *ComfyUI) uploadImage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f, hdr, err := r.FormFile("image")
	if err != nil || hdr.Filename == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	defer func(f multipart.File) { _ = f.Close() }(f)
	data, _ := io.ReadAll(f)
	typ := r.FormValue("type")
	if typ == "" {
		typ = "input"
	}
	sub := r.FormValue("subfolder")
	name := hdr.Filename
	if strings.Contains(name, "..") || strings.Contains(sub, "..") || strings.HasPrefix(sub, "/") {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	overwrite := r.FormValue("overwrite")
	c.mu.Lock()
	if overwrite != "true" && overwrite != "1" {
		ext := ""
		base := name
		if i := strings.LastIndex(name, "."); i > 0 {
			base, ext = name[:i], name[i:]
		}
		for i := 1; ; i++ {
			old, exists := c.files[fileKey(typ, sub, name)]
			if !exists || bytes.Equal(old, data) {
				break
			}
			name = fmt.Sprintf("%s (%d)%s", base, i, ext)
		}
	}
	c.files[fileKey(typ, sub, name)] = data
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, map[string]any{"name": name, "subfolder": sub, "type": typ})
}

// ws is the /ws event stream. A clientId reuses (replaces) a session; none
// gets a fresh sid.
func (c *ComfyUI) ws(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	conn.SetReadLimit(1 << 20)
	sid := r.URL.Query().Get("clientId")
	if sid == "" {
		sid = strings.ReplaceAll(newUUID(), "-", "")
	}
	sock := &comfySocket{sid: sid, conn: conn, out: make(chan []byte, 4096), done: make(chan struct{})}
	c.mu.Lock()
	old := c.sockets[sid]
	c.sockets[sid] = sock
	status := c.queueInfoLocked()
	lastNode, current := c.lastNode, c.clientID
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	go sock.writer()
	c.deliver(sock, "status", map[string]any{"status": status, "sid": sid})
	if current == sid && lastNode != nil {
		c.deliver(sock, "executing", map[string]any{"node": lastNode})
	}
	select {
	case <-c.done:
	default:
		for {
			if _, _, err := conn.Read(context.Background()); err != nil {
				break
			}
		}
	}
	sock.close()
	c.mu.Lock()
	if c.sockets[sid] == sock {
		delete(c.sockets, sid)
	}
	c.mu.Unlock()
}

func wsMessage(typ string, data any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	return b
}

// WSMessage is one message the fake sent on a /ws connection.
type WSMessage struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// deliver queues one message on sock and records it.
func (c *ComfyUI) deliver(sock *comfySocket, typ string, data any) {
	msg := wsMessage(typ, data)
	var m WSMessage
	_ = json.Unmarshal(msg, &m)
	c.mu.Lock()
	c.sent[sock.sid] = append(c.sent[sock.sid], m)
	c.mu.Unlock()
	sock.enqueue(msg)
}

// Sent lists the messages the fake sent to a client id's /ws sessions, in
// order.
func (c *ComfyUI) Sent(clientID string) []WSMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]WSMessage(nil), c.sent[clientID]...)
}

func (s *comfySocket) enqueue(b []byte) {
	select {
	case s.out <- b:
	case <-s.done:
	default:
	}
}

func (s *comfySocket) writer() {
	for {
		select {
		case b := <-s.out:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := s.conn.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				s.close()
				return
			}
		case <-s.done:
			return
		}
	}
}

// send is PromptServer.send_sync: to sid, or to every socket when sid is
// empty and the event is broadcast (an event for a prompt queued without
// client_id goes to everyone).
func (c *ComfyUI) send(sid, event string, data any, broadcast bool) {
	if sid == "" && !broadcast {
		return
	}
	c.mu.Lock()
	var targets []*comfySocket
	if sid == "" {
		for _, s := range c.sockets {
			targets = append(targets, s)
		}
	} else if s, ok := c.sockets[sid]; ok {
		targets = append(targets, s)
	}
	c.mu.Unlock()
	for _, s := range targets {
		c.deliver(s, event, data)
	}
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

func (c *ComfyUI) worker() {
	defer c.inflight.Done()
	for {
		p := c.next()
		if p == nil {
			return
		}
		c.execute(p)
	}
}

// next takes the queued prompt with the lowest number, waiting for one.
func (c *ComfyUI) next() *comfyPrompt {
	for {
		c.mu.Lock()
		if len(c.pending) > 0 {
			p := c.sortedPendingLocked()[0]
			c.pending = slices.DeleteFunc(c.pending, func(q *comfyPrompt) bool { return q == p })
			c.running = p
			status := c.queueInfoLocked()
			c.mu.Unlock()
			c.send("", "status", map[string]any{"status": status}, true)
			return p
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.done:
			return nil
		}
	}
}

// execute runs one prompt the way PromptExecutor does, with progress on
// the sampler node: WithTokens sets its steps (else the workflow's steps),
// and WithTokenDelay/WithRelease/Hold pace them.
func (c *ComfyUI) execute(p *comfyPrompt) {
	client := p.clientID
	c.mu.Lock()
	c.clientID = client
	c.mu.Unlock()
	var messages [][]any
	add := func(event string, data map[string]any, broadcast bool) {
		data["timestamp"] = time.Now().UnixMilli()
		messages = append(messages, []any{event, data})
		if client != "" || broadcast {
			c.send(client, event, data, true)
		}
	}
	add("execution_start", map[string]any{"prompt_id": p.id}, false)
	add("execution_cached", map[string]any{"nodes": []string{}, "prompt_id": p.id}, false)

	order := executionOrder(p.prompt, p.outputs)
	work := ""
	for _, id := range order {
		if comfyNodes[classOf(p.prompt, id)].sampler {
			work = id
			break
		}
	}
	if work == "" && len(order) > 0 {
		work = order[0]
	}
	outputs := map[string]any{}
	meta := map[string]any{}
	var executed []string
	interrupted, closing := "", false
	interruptedNow := func() bool {
		select {
		case <-p.interrupt:
			return true
		default:
			return false
		}
	}
run:
	for _, id := range order {
		if interruptedNow() {
			interrupted = id
			break
		}
		c.mu.Lock()
		c.lastNode = id
		c.mu.Unlock()
		c.send(client, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": p.id}, true)
		class := classOf(p.prompt, id)
		if id == work {
			steps := c.steps(p.prompt, id)
			for i := 0; i < steps; i++ {
				if !c.paceCtx(context.Background(), nil, i, p.interrupt) {
					if interruptedNow() {
						interrupted = id
					} else {
						closing = true
					}
					break run
				}
				c.send(client, "progress", map[string]any{"value": i + 1, "max": steps, "prompt_id": p.id, "node": id}, true)
			}
		}
		if comfyNodes[class].output {
			images := c.saveImages(p, id, class)
			outputs[id] = map[string]any{"images": images}
			meta[id] = map[string]any{"node_id": id, "display_node": id, "parent_node": nil, "real_node_id": id}
			c.send(client, "executed", map[string]any{"node": id, "display_node": id, "output": map[string]any{"images": images}, "prompt_id": p.id}, true)
		}
		executed = append(executed, id)
	}
	if closing {
		return
	}
	status := comfyStatus{StatusStr: "success", Completed: true}
	if interrupted != "" {
		add("execution_interrupted", map[string]any{"prompt_id": p.id, "node_id": interrupted,
			"node_type": classOf(p.prompt, interrupted), "executed": nonNil(executed)}, true)
		status = comfyStatus{StatusStr: "error", Completed: false}
	} else {
		add("execution_success", map[string]any{"prompt_id": p.id}, false)
	}
	status.Messages = messages
	c.mu.Lock()
	c.history[p.id] = &comfyHistory{Prompt: p.item(), Outputs: outputs, Status: status, Meta: meta}
	c.histOrder = append(c.histOrder, p.id)
	c.running = nil
	c.lastNode = nil
	c.clientID = ""
	qs := c.queueInfoLocked()
	c.mu.Unlock()
	c.Server.mu.Lock()
	c.notifyLocked()
	c.Server.mu.Unlock()
	c.send("", "status", map[string]any{"status": qs}, true)
	if client != "" {
		c.send(client, "executing", map[string]any{"node": nil, "prompt_id": p.id}, true)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func classOf(prompt map[string]any, id string) string {
	node, _ := prompt[id].(map[string]any)
	ct, _ := node["class_type"].(string)
	return ct
}

func (c *ComfyUI) steps(prompt map[string]any, id string) int {
	if c.cfg.tokensSet {
		return c.cfg.tokens
	}
	node, _ := prompt[id].(map[string]any)
	inputs, _ := node["inputs"].(map[string]any)
	switch v := inputs["steps"].(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil && n > 0 {
			return int(n)
		}
	case float64:
		if v > 0 {
			return int(v)
		}
	}
	return c.cfg.tokens
}

// saveImages stores the output images of an output node and returns their
// descriptors, named as SaveImage and PreviewImage name them.
func (c *ComfyUI) saveImages(p *comfyPrompt, id, class string) []map[string]any {
	node, _ := p.prompt[id].(map[string]any)
	inputs, _ := node["inputs"].(map[string]any)
	prefix, _ := inputs["filename_prefix"].(string)
	if prefix == "" {
		prefix = "ComfyUI"
	}
	typ := "output"
	if class == "PreviewImage" {
		typ = "temp"
		prefix = "ComfyUI_temp_" + strings.ToLower(randomAlnum(5))
	}
	img := fakePNG(p.id + "/" + id)
	c.mu.Lock()
	c.counter++
	name := fmt.Sprintf("%s_%05d_.png", prefix, c.counter)
	c.files[fileKey(typ, "", name)] = img
	c.mu.Unlock()
	return []map[string]any{{"filename": name, "subfolder": "", "type": typ}}
}

// fakePNG is a small valid PNG whose colour depends on seed.
func fakePNG(seed string) []byte {
	sum := sha256.Sum256([]byte(seed))
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			img.Set(x, y, color.RGBA{R: sum[0] ^ byte(x*3), G: sum[1] ^ byte(y*3), B: sum[2], A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
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
