package chatterbox

import (
	"context"
	"fmt"
	"net/http"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
)

func init() { adapter.RegisterReclaimer(config.KindChatterbox, Reclaimer{}) }

// Reclaimer is the Chatterbox TTS Server's reclaim side. Sources:
// devnen/Chatterbox-TTS-Server server.py and engine.py (commit
// 3badba101dc1, read through the search tool):
//
//   - Loaded: GET /api/model-info (get_model_info_endpoint) answers
//     engine.get_model_info(): {"loaded": bool, "type": "original" |
//     "turbo" | "multilingual", "class_name": "ChatterboxTurboTTS", ...}.
//     The server holds exactly one model.
//   - Unload: the server loads its one model at startup (lifespan ->
//     engine.load_model()) and never on demand: POST /api/unload
//     (unload_model_endpoint) frees it, after which every /tts answers 503
//     "TTS engine model is not currently loaded" until someone calls POST
//     /restart_server. Borrowers cannot load or swap that model (both
//     routes are management), so it is never a borrowed model, and
//     unloading it would leave the owner's server mute. Unload is
//     therefore ErrUnsupported: a borrower's speech holds GPU memory only
//     while its request runs.
//   - Jobs: the server has no job id and no way to stop a synthesis; its
//     work is its request, which the gate tracks and closes, so CancelJob
//     and JobDone are ErrUnsupported.
type Reclaimer struct{}

var _ adapter.Reclaimer = Reclaimer{}

// Kind returns config.KindChatterbox.
func (Reclaimer) Kind() string { return config.KindChatterbox }

type modelInfo struct {
	Loaded    bool   `json:"loaded"`
	Type      string `json:"type"`
	ClassName string `json:"class_name"`
}

// Loaded reports the server's one model by class name ("ChatterboxTurboTTS"),
// or by type when the class is not reported, and nothing when unloaded.
func (Reclaimer) Loaded(ctx context.Context, u adapter.Upstream) ([]string, error) {
	var mi modelInfo
	if err := u.Call(ctx, http.MethodGet, "/api/model-info", nil, &mi); err != nil {
		return nil, fmt.Errorf("chatterbox: loaded models: %w", err)
	}
	if !mi.Loaded {
		return []string{}, nil
	}
	switch {
	case mi.ClassName != "":
		return []string{mi.ClassName}, nil
	case mi.Type != "":
		return []string{mi.Type}, nil
	}
	return []string{"chatterbox"}, nil
}

// SameModel is true for any listed model: the server has only one, and a
// request's "model" field (OpenAI's /v1/audio/speech) does not choose it.
func (Reclaimer) SameModel(listed, _ string) bool { return listed != "" }

// Unload is unsupported; see Reclaimer.
func (Reclaimer) Unload(context.Context, adapter.Upstream, []string) error {
	return fmt.Errorf("chatterbox: unload: %w (the server's one model is the owner's, loaded at startup; /api/unload would leave it unable to speak until /restart_server)", adapter.ErrUnsupported)
}

// CancelJob is unsupported: the server has no jobs beyond its requests.
func (Reclaimer) CancelJob(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("chatterbox: cancel job: %w (the server has no jobs; close the request)", adapter.ErrUnsupported)
}

// JobDone is unsupported: synthesis ends with its request.
func (Reclaimer) JobDone(context.Context, adapter.Upstream, string) (bool, error) {
	return false, fmt.Errorf("chatterbox: job done: %w (work ends with its request)", adapter.ErrUnsupported)
}
