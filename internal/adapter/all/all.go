// Package all links every adapter kind into the binary: import it for its
// side effect, then build adapters with adapter.For.
package all

import (
	// Each kind registers itself with adapter.Register.
	_ "github.com/vacancyd/vacancyd/internal/adapter/chatterbox"
	_ "github.com/vacancyd/vacancyd/internal/adapter/comfyui"
	_ "github.com/vacancyd/vacancyd/internal/adapter/ollama"
	_ "github.com/vacancyd/vacancyd/internal/adapter/openai"
)
