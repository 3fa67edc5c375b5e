package fakeupstream

// Options shared by every fake.

import (
	"time"
)

// Option configures a fake.
type Option func(*config)

type config struct {
	bearer    string
	tokensSet bool
	basic     bool
	basicUser string
	basicPass string
	tokens    int
	delay     time.Duration
	release   <-chan struct{}
	models    []string
	voices    []string
	version   string
	keepAlive time.Duration
	stubborn  bool
}

func defaultConfig() config {
	return config{tokens: 5, keepAlive: 5 * time.Minute}
}

// WithBearer makes the fake require "Authorization: Bearer token".
func WithBearer(token string) Option { return func(c *config) { c.bearer = token } }

// WithBasicAuth makes the fake require HTTP basic credentials.
func WithBasicAuth(user, pass string) Option {
	return func(c *config) { c.basic, c.basicUser, c.basicPass = true, user, pass }
}

// WithTokens sets how many pieces a generation streams: tokens for Ollama
// and llama.cpp (a request's own num_predict/max_tokens/n_predict may cut
// it shorter), sampler steps for ComfyUI, audio chunks for Chatterbox.
// The default is 5.
func WithTokens(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.tokens, c.tokensSet = n, true
		}
	}
}

// WithTokenDelay makes the fake wait d before each piece after the first.
func WithTokenDelay(d time.Duration) Option { return func(c *config) { c.delay = d } }

// WithRelease makes every generation wait, after its first piece, until ch
// is closed (or the request is cancelled, or the fake closes).
func WithRelease(ch <-chan struct{}) Option { return func(c *config) { c.release = ch } }

// WithModels sets the models the fake serves. For Ollama a name without a
// tag gets ":latest", and a name containing "embed" is an embedding-only
// model; for llama.cpp the first name is the loaded model's alias; for
// ComfyUI they are the checkpoint file names.
func WithModels(names ...string) Option {
	return func(c *config) { c.models = append([]string(nil), names...) }
}

// WithVoices sets Chatterbox's predefined voice files (e.g. "Emily.wav").
func WithVoices(files ...string) Option {
	return func(c *config) { c.voices = append([]string(nil), files...) }
}

// WithRefuseToStop makes a ComfyUI fake accept /interrupt and a queue
// delete or clear (200, as the real server answers) without stopping or
// removing anything: the running prompt keeps running and queued prompts
// stay queued, as a wedged server would behave. Reclaim tests use it to
// prove that work whose end cannot be confirmed is held. The requests are
// recorded as usual; [ComfyUI.Interrupted] stays empty, since nothing was
// stopped. Other kinds ignore it.
func WithRefuseToStop() Option { return func(c *config) { c.stubborn = true } }

// WithVersion sets the version the fake reports (Ollama's /api/version,
// llama.cpp's build info, ComfyUI's comfyui_version).
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithDefaultKeepAlive sets Ollama's OLLAMA_KEEP_ALIVE (default 5m): how
// long a model stays loaded when a request gives no keep_alive.
func WithDefaultKeepAlive(d time.Duration) Option { return func(c *config) { c.keepAlive = d } }
