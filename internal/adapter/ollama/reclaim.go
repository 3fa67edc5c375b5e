package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() { adapter.RegisterReclaimer(config.KindOllama, Reclaimer{}) }

// Reclaimer is Ollama's reclaim side. Sources, read through the search
// tool in ollama/ollama:
//
//   - Loaded: GET /api/ps (server/routes.go PsHandler) answers
//     api.ProcessResponse{"models": [api.ProcessModelResponse{"name",
//     "model", "size_vram", "expires_at", ...}]}, one per runner the
//     scheduler holds, named model.ParseName(ShortName).DisplayShortest()
//     ("llama3.2:latest", "user/model:tag", "host/ns/model:tag").
//   - Unload: POST /api/generate {"model": m, "keep_alive": 0} with no
//     prompt (server/routes.go GenerateHandler: "if req.Prompt == "" &&
//     req.KeepAlive != nil && req.KeepAlive.Duration == 0 {
//     s.sched.expireRunner(m) ...}", answering done_reason "unload"). The
//     scheduler unloads an idle runner at once and a busy one as soon as
//     its requests end (server/sched.go expireRunner sets the session
//     duration to 0), so a borrower's unfinished stream keeps its model
//     until the gate closes it. An unknown model answers 404 "model '...'
//     not found": nothing to unload.
//   - Jobs: every Ollama request ends with its HTTP exchange; closing the
//     request cancels the generation (the runner sees the context end), so
//     CancelJob and JobDone are ErrUnsupported.
type Reclaimer struct{}

var _ adapter.Reclaimer = Reclaimer{}

// Kind returns config.KindOllama.
func (Reclaimer) Kind() string { return config.KindOllama }

type psResponse struct {
	Models []struct {
		Name  string `json:"name"`
		Model string `json:"model"`
	} `json:"models"`
}

// Loaded lists /api/ps.
func (Reclaimer) Loaded(ctx context.Context, u adapter.Upstream) ([]string, error) {
	var ps psResponse
	if err := u.Call(ctx, http.MethodGet, "/api/ps", nil, &ps); err != nil {
		return nil, fmt.Errorf("ollama: loaded models: %w", err)
	}
	out := make([]string, 0, len(ps.Models))
	for _, m := range ps.Models {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out, nil
}

// SameModel compares names as Ollama's model.Name does: host, namespace
// and tag default to registry.ollama.ai, library and latest, a digest is
// ignored, and case does not matter.
func (Reclaimer) SameModel(listed, named string) bool {
	a, b := CanonicalModel(listed), CanonicalModel(named)
	return a != "" && a == b
}

// unloadRequest is the body of an unload: no prompt, keep_alive 0 (a
// number of seconds, which api.Duration reads as 0s).
type unloadRequest struct {
	Model     string `json:"model"`
	KeepAlive int    `json:"keep_alive"`
}

// Unload sends an unload for each model. Errors for some models do not
// stop the others; they are joined.
func (Reclaimer) Unload(ctx context.Context, u adapter.Upstream, models []string) error {
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	var errs []error
	seen := map[string]bool{}
	for _, m := range models {
		key := CanonicalModel(m)
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		err := u.Call(ctx, http.MethodPost, "/api/generate", unloadRequest{Model: m}, nil)
		if err != nil && adapter.StatusCode(err) != http.StatusNotFound {
			errs = append(errs, fmt.Errorf("ollama: unload %q: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// CancelJob is unsupported: Ollama work ends with its request.
func (Reclaimer) CancelJob(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("ollama: cancel job: %w (a request's generation stops when the request is closed)", adapter.ErrUnsupported)
}

// JobDone is unsupported: Ollama work ends with its request.
func (Reclaimer) JobDone(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("ollama: job done: %w (work ends with its request)", adapter.ErrUnsupported)
}

// Defaults of Ollama's model names (types/model/name.go DefaultName).
const (
	defaultHost      = "registry.ollama.ai"
	defaultNamespace = "library"
	defaultTag       = "latest"
)

// CanonicalModel is name in full, lower-cased form, host/namespace/model:tag
// ("llama3.2" is "registry.ollama.ai/library/llama3.2:latest"), the way
// Ollama's model.ParseName fills a short name in; a scheme prefix and a
// digest suffix are dropped. It returns "" for an empty name, and a name
// Ollama would not accept (more than three parts, an empty part, spaces)
// lower-cased as given, so that it matches only itself.
func CanonicalModel(name string) string {
	raw := strings.ToLower(strings.TrimSpace(name))
	n := raw
	if i := strings.Index(n, "://"); i >= 0 {
		n = n[i+3:]
	}
	if i := strings.Index(n, "@"); i >= 0 {
		n = n[:i]
	}
	if n == "" {
		return ""
	}
	tag := defaultTag
	last := n[strings.LastIndex(n, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
		n = n[:len(n)-len(last)+i]
	}
	host, ns := defaultHost, defaultNamespace
	parts := strings.Split(n, "/")
	switch len(parts) {
	case 1:
	case 2:
		ns = parts[0]
	case 3:
		host, ns = parts[0], parts[1]
	default:
		return raw
	}
	model := parts[len(parts)-1]
	for _, p := range []string{host, ns, model, tag} {
		if p == "" || strings.ContainsFunc(p, unicode.IsSpace) {
			return raw
		}
	}
	return host + "/" + ns + "/" + model + ":" + tag
}
