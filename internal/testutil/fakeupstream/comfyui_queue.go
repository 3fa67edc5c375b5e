package fakeupstream

// The queue: validating and queueing prompts (/prompt), and /queue,
// /interrupt and /free.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

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
