package fakeupstream

// The worker: taking prompts off the queue and executing them, with
// progress events and saved images.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"time"
)

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
