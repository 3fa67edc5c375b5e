package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() { adapter.RegisterReclaimer(config.KindOpenAI, Reclaimer{}) }

// Reclaimer is the reclaim side of OpenAI-compatible servers. Sources, read
// through the search tool:
//
//   - Loaded: GET /v1/models lists {"data": [{"id": ...}]} (OpenAI's shape,
//     served by llama.cpp tools/server server.cpp and by vLLM). A single
//     model llama-server and vLLM list only the model they serve, which is
//     loaded. llama-server in router mode (started without a model;
//     tools/server/server-models.cpp get_router_models) lists every model it
//     knows, each with "status": {"value": "unloaded" | "loading" |
//     "loaded" | "sleeping" ...}; only "loaded" and "loading" hold memory.
//   - Unload: llama-server's router mode has POST /models/unload
//     {"model": name} (server.cpp registers it in the "custom routes for
//     router" block; server-models.cpp post_router_models_unload), answering
//     {"success": true}, or 400 with "model is not running" ("model is not
//     loaded" in earlier revisions) or "model is not found". Nothing else in this family unloads on request: a single
//     model llama-server answers the route with its 404 handler ("File Not
//     Found"), vLLM with FastAPI's {"detail": "Not Found"}; both mean
//     ErrUnsupported.
//   - Jobs: every request ends with its HTTP exchange (llama.cpp cancels a
//     slot's task when its connection closes), so CancelJob and JobDone are
//     ErrUnsupported.
type Reclaimer struct{}

var _ adapter.Reclaimer = Reclaimer{}

// Kind returns config.KindOpenAI.
func (Reclaimer) Kind() string { return config.KindOpenAI }

type modelList struct {
	Data []struct {
		ID     string `json:"id"`
		Status *struct {
			Value string `json:"value"`
		} `json:"status"`
	} `json:"data"`
}

// Loaded lists the models of /v1/models that hold memory.
func (Reclaimer) Loaded(ctx context.Context, u adapter.Upstream) ([]string, error) {
	var l modelList
	if err := u.Call(ctx, http.MethodGet, "/v1/models", nil, &l); err != nil {
		return nil, fmt.Errorf("openai: loaded models: %w", err)
	}
	out := make([]string, 0, len(l.Data))
	for _, m := range l.Data {
		if m.ID == "" {
			continue
		}
		if m.Status != nil && m.Status.Value != "loaded" && m.Status.Value != "loading" {
			continue
		}
		out = append(out, m.ID)
	}
	return out, nil
}

// SameModel compares model ids exactly, as these servers route by them.
func (Reclaimer) SameModel(listed, named string) bool { return listed != "" && listed == named }

// Unload asks a llama-server router to unload each model; a server without
// the router's unload route reports ErrUnsupported.
func (Reclaimer) Unload(ctx context.Context, u adapter.Upstream, models []string) error {
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	var errs []error
	seen := map[string]bool{}
	for _, m := range models {
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		err := u.Call(ctx, http.MethodPost, "/models/unload", map[string]string{"model": m}, nil)
		switch {
		case err == nil, notRunning(err):
		case noUnloadRoute(err):
			return fmt.Errorf("openai: unload %q: %w (the server has no unload: llama-server offers one only in router mode)", m, adapter.ErrUnsupported)
		default:
			errs = append(errs, fmt.Errorf("openai: unload %q: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// routerMessage reads llama.cpp's error message from a StatusError.
func routerMessage(err error) string {
	var se *adapter.StatusError
	if !errors.As(err, &se) {
		return ""
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(se.Body), &body) != nil {
		return ""
	}
	return body.Error.Message
}

// notRunning: the router knows the model but does not hold it, or does
// not know it at all (then no borrower request can have loaded it).
func notRunning(err error) bool {
	switch adapter.StatusCode(err) {
	case http.StatusBadRequest, http.StatusNotFound:
		msg := routerMessage(err)
		return strings.Contains(msg, "is not running") || strings.Contains(msg, "is not found") || strings.Contains(msg, "not loaded")
	}
	return false
}

// noUnloadRoute: the server has no POST /models/unload.
func noUnloadRoute(err error) bool {
	c := adapter.StatusCode(err)
	return c == http.StatusNotFound || c == http.StatusMethodNotAllowed || c == http.StatusNotImplemented
}

// CancelJob is unsupported: work ends with its request.
func (Reclaimer) CancelJob(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("openai: cancel job: %w (a request's generation stops when the request is closed)", adapter.ErrUnsupported)
}

// JobDone is unsupported: work ends with its request.
func (Reclaimer) JobDone(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("openai: job done: %w (work ends with its request)", adapter.ErrUnsupported)
}
