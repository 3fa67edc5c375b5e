package fakeupstream

import (
	"slices"
	"testing"
)

// WithRefuseToStop: /interrupt and queue deletes are answered 200 and
// ignored, so the running prompt keeps running and the queued one stays.
func TestComfyUIRefuseToStop(t *testing.T) {
	c := StartComfyUI(t, WithTokens(4), WithRefuseToStop())
	release := c.Hold()
	t.Cleanup(release)
	a := dialComfy(t, c, "a")

	id1 := submit(t, c, "/prompt", "a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "one"))
	id2 := submit(t, c, "/prompt", "a", ComfyTxt2Img("sd_xl_base_1.0.safetensors", "two"))
	a.until(func(m WSMessage) bool { return m.Type == "progress" })

	if res := do(t, "POST", c.URL+"/interrupt", map[string]any{"prompt_id": id1}); res.status != 200 {
		t.Fatalf("interrupt %d", res.status)
	}
	if res := do(t, "POST", c.URL+"/interrupt", nil); res.status != 200 {
		t.Fatalf("global interrupt %d", res.status)
	}
	if res := do(t, "POST", c.URL+"/queue", map[string]any{"delete": []string{id2}}); res.status != 200 {
		t.Fatalf("delete %d", res.status)
	}
	if res := do(t, "POST", c.URL+"/queue", map[string]any{"clear": true}); res.status != 200 {
		t.Fatalf("clear %d", res.status)
	}
	if c.Running() != id1 || !slices.Equal(c.Pending(), []string{id2}) || len(c.Interrupted()) != 0 {
		t.Fatalf("running %q, pending %v, interrupted %v", c.Running(), c.Pending(), c.Interrupted())
	}
	if n := len(c.RequestsTo("/interrupt")); n != 2 {
		t.Fatalf("%d interrupts recorded", n)
	}
	// Released, the prompts run to completion as usual.
	release()
	a.until(endOf(id1))
	if ok, err := c.WaitDone(waitCtx(t), id2); err != nil || !ok {
		t.Fatalf("second prompt %v %v", ok, err)
	}
}
