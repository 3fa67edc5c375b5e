package ollama

import "github.com/vacancyd/vacancyd/internal/adapter"

const (
	inference  = adapter.ClassInference
	read       = adapter.ClassBorrowerRead
	management = adapter.ClassManagement
)

// src is where every row below was checked: Server.GenerateRoutes in
// ollama/ollama server/routes.go (commit 00188139f12f, read through the
// search tool), unless a row says otherwise.
const src = "ollama server/routes.go GenerateRoutes"

// Routes is the Ollama route table. Body rules (unloads, cloud models, web
// search tools, keep_alive cap) refine the inference and read rows; see
// bodyRules.
var Routes = []adapter.Route{
	// General.
	{Method: "HEAD", Path: "/", Class: read, Source: src + `: "Ollama is running" (health)`},
	{Method: "GET", Path: "/", Class: read, Source: src + `: "Ollama is running" (health)`},
	{Method: "HEAD", Path: "/api/version", Class: read, Source: src},
	{Method: "GET", Path: "/api/version", Class: read, Source: src},
	{Method: "GET", Path: "/api/status", Class: management, Source: src + ": StatusHandler (the owner's cloud settings, not a listed read)"},

	// Local model cache management.
	{Method: "POST", Path: "/api/pull", Class: management, Source: src + ": PullHandler"},
	{Method: "POST", Path: "/api/push", Class: management, Source: src + ": PushHandler"},
	{Method: "HEAD", Path: "/api/tags", Class: read, Source: src + ": ListHandler (model discovery)"},
	{Method: "GET", Path: "/api/tags", Class: read, Source: src + ": ListHandler (model discovery)"},
	{Method: "POST", Path: "/api/show", Class: read, Source: src + ": ShowHandler (model discovery; a cloud model is management)"},
	{Method: "DELETE", Path: "/api/delete", Class: management, Source: src + ": DeleteHandler"},

	// The owner's ollama.com account.
	{Method: "POST", Path: "/api/me", Class: management, Source: src + ": WhoamiHandler (owner's ollama.com account)"},
	{Method: "POST", Path: "/api/signout", Class: management, Source: src + ": SignoutHandler"},
	{Method: "DELETE", Path: "/api/user/keys/{encodedKey}", Class: management, Source: src + ": SignoutHandler (deprecated route)"},

	// Create.
	{Method: "POST", Path: "/api/create", Class: management, Source: src + ": CreateHandler"},
	{Method: "POST", Path: "/api/blobs/{digest}", Class: management, Source: src + ": CreateBlobHandler"},
	{Method: "HEAD", Path: "/api/blobs/{digest}", Class: management, Source: src + ": HeadBlobHandler"},
	{Method: "POST", Path: "/api/copy", Class: management, Source: src + ": CopyHandler"},

	// Web search and fetch run on the owner's ollama.com account.
	{Method: "POST", Path: "/api/experimental/web_search", Class: management, Source: src + ": WebSearchExperimentalHandler (proxied to ollama.com /api/web_search)"},
	{Method: "POST", Path: "/api/experimental/web_fetch", Class: management, Source: src + ": WebFetchExperimentalHandler (proxied to ollama.com /api/web_fetch)"},
	{Method: "POST", Path: "/api/web_search", Class: management, Source: "ollama server/routes.go webExperimentalProxyHandler: the ollama.com path; listed in case a server serves it locally"},
	{Method: "POST", Path: "/api/web_fetch", Class: management, Source: "ollama server/routes.go webExperimentalProxyHandler: the ollama.com path; listed in case a server serves it locally"},

	// Inference.
	{Method: "GET", Path: "/api/ps", Class: management, Source: src + ": PsHandler (what the owner has loaded)"},
	{Method: "POST", Path: "/api/generate", Class: inference, Source: src + ": GenerateHandler"},
	{Method: "POST", Path: "/api/chat", Class: inference, Source: src + ": ChatHandler"},
	{Method: "POST", Path: "/api/embed", Class: inference, Source: src + ": EmbedHandler"},
	{Method: "POST", Path: "/api/embeddings", Class: inference, Source: src + ": EmbeddingsHandler"},

	// Inference (OpenAI compatibility).
	{Method: "POST", Path: "/v1/chat/completions", Class: inference, Source: src + ": ChatMiddleware + ChatHandler"},
	{Method: "POST", Path: "/v1/completions", Class: inference, Source: src + ": CompletionsMiddleware + GenerateHandler"},
	{Method: "POST", Path: "/v1/embeddings", Class: inference, Source: src + ": EmbeddingsMiddleware + EmbedHandler"},
	{Method: "GET", Path: "/v1/models", Class: read, Source: src + ": ListMiddleware + ListHandler (model discovery)"},
	{Method: "GET", Path: "/v1/models/{model}", Class: read, Source: src + ": RetrieveMiddleware + ShowHandler (a cloud model is management)"},
	{Method: "POST", Path: "/v1/responses", Class: inference, Source: src + ": ResponsesMiddleware + ChatHandler"},
	{Method: "POST", Path: "/v1/images/generations", Class: inference, Source: src + ": ImageGenerationsMiddleware + GenerateHandler"},
	{Method: "POST", Path: "/v1/images/edits", Class: inference, Source: src + ": ImageEditsMiddleware + GenerateHandler"},
	{Method: "POST", Path: "/v1/audio/transcriptions", Class: inference, Source: src + ": TranscriptionMiddleware (multipart) + ChatHandler"},

	// Inference (Anthropic compatibility).
	{Method: "POST", Path: "/v1/messages", Class: inference, Source: src + ": AnthropicMessagesMiddleware + ChatHandler"},
}

// rule is the body rule of one route.
type rule uint8

const (
	ruleNone rule = iota
	// ruleGenerate: /api/generate; unload is keep_alive 0 with an empty prompt.
	ruleGenerate
	// ruleChat: /api/chat; unload is keep_alive 0 with no messages.
	ruleChat
	// ruleEmbed: /api/embed; unload is keep_alive 0 with no input.
	ruleEmbed
	// ruleEmbeddings: /api/embeddings; unload is keep_alive 0 with an empty prompt.
	ruleEmbeddings
	// ruleShow: /api/show; model or name must not be a cloud model.
	ruleShow
	// ruleV1: an OpenAI or Anthropic JSON route; cloud model, web search
	// tools, keep_alive capped only when present.
	ruleV1
	// ruleV1Form: an OpenAI route that also accepts form bodies (and reads
	// the model from the query); cloud model only.
	ruleV1Form
)

// bodyRules maps "METHOD path" rows to their body rule. Every key is a row
// of Routes (checked by a test).
var bodyRules = map[string]rule{
	"POST /api/generate":            ruleGenerate,
	"POST /api/chat":                ruleChat,
	"POST /api/embed":               ruleEmbed,
	"POST /api/embeddings":          ruleEmbeddings,
	"POST /api/show":                ruleShow,
	"POST /v1/chat/completions":     ruleV1,
	"POST /v1/completions":          ruleV1,
	"POST /v1/embeddings":           ruleV1,
	"POST /v1/responses":            ruleV1,
	"POST /v1/images/generations":   ruleV1,
	"POST /v1/messages":             ruleV1,
	"POST /v1/images/edits":         ruleV1Form,
	"POST /v1/audio/transcriptions": ruleV1Form,
}
