package comfyui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() { adapter.RegisterReclaimer(config.KindComfyUI, Reclaimer{}) }

// Reclaimer is ComfyUI's reclaim side: a borrower's prompt outlives the
// POST /prompt that queued it, so it is tracked and cancelled by prompt id.
// Sources, read through the search tool in comfyanonymous/ComfyUI:
//
//   - server.py get_queue: GET /queue answers {"queue_running": [...],
//     "queue_pending": [...]}, each item [number, prompt_id, prompt,
//     extra_data, outputs_to_execute] (execution.py PromptQueue). A prompt
//     moves from pending to running and from running to the history each
//     under the queue's mutex, so a prompt id the server accepted is in
//     exactly one of the three.
//   - server.py get_history (GET /history/{prompt_id}) answers
//     {prompt_id: {...}} once the prompt has ended (success, error or
//     interrupt) and {} before.
//   - server.py post_queue: POST /queue {"delete": [prompt_id]} removes a
//     pending prompt and nothing else.
//   - server.py post_interrupt: POST /interrupt {"prompt_id": id}; since the
//     2025 revision it interrupts only when that prompt is the running one
//     ("Prompt ... is not currently running, skipping interrupt"); older
//     servers ignore the body and interrupt whatever runs. CancelJob
//     therefore interrupts only after /queue shows the borrower's prompt
//     running. On an older server a prompt that ends between that check
//     and the interrupt leaves the interrupt to the next prompt: a window
//     of one round trip that only a server with targeted interrupt closes.
//   - server.py post_free: POST /free {"unload_models": true,
//     "free_memory": true} sets queue flags that main.py prompt_worker
//     applies between prompts (comfy.model_management.unload_all_models(),
//     then the executor cache reset); it unloads every model, the owner's
//     too, and answers before anything is freed.
//   - ComfyUI has no list of loaded models (/system_stats reports memory
//     totals only), so Loaded is ErrUnsupported.
type Reclaimer struct{}

var _ adapter.Reclaimer = Reclaimer{}

// Kind returns config.KindComfyUI.
func (Reclaimer) Kind() string { return config.KindComfyUI }

// Loaded is unsupported: ComfyUI lists no loaded models.
func (Reclaimer) Loaded(context.Context, adapter.Upstream) ([]string, error) {
	return nil, fmt.Errorf("comfyui: loaded models: %w (ComfyUI lists no loaded models; watch GPU memory instead)", adapter.ErrUnsupported)
}

// SameModel compares checkpoint names exactly.
func (Reclaimer) SameModel(listed, named string) bool { return listed != "" && listed == named }

type freeRequest struct {
	UnloadModels bool `json:"unload_models"`
	FreeMemory   bool `json:"free_memory"`
}

// Unload asks ComfyUI to unload every model and drop its execution cache.
// ComfyUI frees only wholesale, so models is not consulted.
func (Reclaimer) Unload(ctx context.Context, u adapter.Upstream, _ []string) error {
	if err := u.Call(ctx, http.MethodPost, "/free", freeRequest{UnloadModels: true, FreeMemory: true}, nil); err != nil {
		return fmt.Errorf("comfyui: free: %w", err)
	}
	return nil
}

// where a prompt is.
type place int

const (
	placeGone place = iota
	placePending
	placeRunning
)

// queueItem decodes one queue entry far enough to read its prompt id.
type queueItem []json.RawMessage

func (q queueItem) id() string {
	if len(q) < 2 {
		return ""
	}
	var s string
	if json.Unmarshal(q[1], &s) != nil {
		return ""
	}
	return s
}

type queueResponse struct {
	Running []queueItem `json:"queue_running"`
	Pending []queueItem `json:"queue_pending"`
}

// locate finds promptID in /queue.
func locate(ctx context.Context, u adapter.Upstream, promptID string) (place, error) {
	var q queueResponse
	if err := u.Call(ctx, http.MethodGet, "/queue", nil, &q); err != nil {
		return placeGone, err
	}
	for _, it := range q.Running {
		if it.id() == promptID {
			return placeRunning, nil
		}
	}
	for _, it := range q.Pending {
		if it.id() == promptID {
			return placePending, nil
		}
	}
	return placeGone, nil
}

// inHistory reports whether /history/{id} has an entry for promptID.
func inHistory(ctx context.Context, u adapter.Upstream, promptID string) (bool, error) {
	var h map[string]json.RawMessage
	if err := u.Call(ctx, http.MethodGet, "/history/"+url.PathEscape(promptID), nil, &h); err != nil {
		return false, err
	}
	_, ok := h[promptID]
	return ok, nil
}

var errNoID = errors.New("empty prompt id")

// JobDone reports whether the prompt has ended: it has a history entry, or
// it is neither running nor pending (deleted from the queue, or its
// history trimmed).
func (Reclaimer) JobDone(ctx context.Context, u adapter.Upstream, promptID string) (bool, error) {
	if promptID == "" {
		return false, fmt.Errorf("comfyui: job done: %w", errNoID)
	}
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	done, err := inHistory(ctx, u, promptID)
	if err != nil {
		return false, fmt.Errorf("comfyui: job done %s: %w", promptID, err)
	}
	if done {
		return true, nil
	}
	p, err := locate(ctx, u, promptID)
	if err != nil {
		return false, fmt.Errorf("comfyui: job done %s: %w", promptID, err)
	}
	return p == placeGone, nil
}

// CancelJob deletes the prompt from the queue while it is pending,
// interrupts it once /queue shows it running (never another prompt), and
// waits until /queue no longer lists it or ctx ends. An error means the
// last look at the upstream failed.
func (Reclaimer) CancelJob(ctx context.Context, u adapter.Upstream, promptID string) (bool, error) {
	if promptID == "" {
		return false, fmt.Errorf("comfyui: cancel job: %w", errNoID)
	}
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	c := &canceller{u: u, id: promptID}
	if err := adapter.Poll(ctx, func() (bool, error) { return c.step(ctx) }); err == nil {
		return true, nil
	}
	if c.last != nil {
		return false, fmt.Errorf("comfyui: cancel job %s: %w", promptID, c.last)
	}
	return false, nil
}

// canceller is one CancelJob's progress.
type canceller struct {
	u           adapter.Upstream
	id          string
	interrupted bool
	// last is the error of the latest look at the upstream that did not
	// fail merely because ctx ended; nil once a look succeeds.
	last error
}

// step looks at the queue once and acts; after a delete it looks again at
// once, since the prompt may have started running meanwhile.
func (c *canceller) step(ctx context.Context) (bool, error) {
	fail := func(err error) (bool, error) {
		if ctx.Err() == nil {
			c.last = err
		}
		return false, err
	}
	for range 2 {
		p, err := locate(ctx, c.u, c.id)
		if err != nil {
			return fail(err)
		}
		c.last = nil
		switch p {
		case placeGone:
			return true, nil
		case placeRunning:
			if !c.interrupted {
				if err := c.u.Call(ctx, http.MethodPost, "/interrupt", map[string]string{"prompt_id": c.id}, nil); err != nil {
					return fail(err)
				}
				c.interrupted = true
			}
			return false, nil
		case placePending:
			// Deleting names only this prompt, so repeating it is safe.
			if err := c.u.Call(ctx, http.MethodPost, "/queue", map[string][]string{"delete": {c.id}}, nil); err != nil {
				return fail(err)
			}
		}
	}
	return false, nil
}
