package openai

import "github.com/vacancyd/vacancyd/internal/adapter"

const (
	inference  = adapter.ClassInference
	read       = adapter.ClassBorrowerRead
	management = adapter.ClassManagement
)

// Sources checked through the search tool.
const (
	// llama is llama_server() in ggml-org/llama.cpp tools/server/server.cpp
	// (commit 00dd0816129a).
	llama = "llama.cpp tools/server/server.cpp"
	// llamaRouter is the router-mode block of the same function.
	llamaRouter = "llama.cpp tools/server/server.cpp (router mode)"
	// vllm is the endpoint inventory of vllm-project/vllm docs/usage/security.md
	// (commit 00b005cf60f0), which lists every route of `vllm serve` with its
	// purpose; the routers themselves are spread over vllm/entrypoints.
	vllm = "vLLM docs/usage/security.md"
	// vllmDev marks routes vLLM serves only with VLLM_SERVER_DEV_MODE=1 or
	// profiling enabled (same document).
	vllmDev = "vLLM docs/usage/security.md (dev mode / profiler)"
)

// Routes is the table for OpenAI-compatible servers: llama.cpp's
// llama-server and vLLM, whose route sets are merged (each server answers
// only its own; the other's rows are harmless 404s there). Where both
// servers have a route, the row cites llama.cpp.
var Routes = []adapter.Route{
	// Health and model discovery.
	{Method: "GET", Path: "/health", Class: read, Source: llama + " get_health; vLLM /health"},
	{Method: "GET", Path: "/v1/health", Class: read, Source: llama + " get_health"},
	{Method: "GET", Path: "/models", Class: read, Source: llama + " get_models"},
	{Method: "GET", Path: "/v1/models", Class: read, Source: llama + " get_models; vLLM /v1/models"},
	{Method: "GET", Path: "/v1/models/{model}", Class: read, Source: "OpenAI API retrieve-model route (not in llama.cpp or vLLM; served by other OpenAI-compatible servers)"},
	{Method: "GET", Path: "/ping", Class: read, Source: vllm + " /ping (SageMaker health)"},
	{Method: "GET", Path: "/version", Class: read, Source: vllm + " /version"},

	// Server state the owner watches or controls.
	{Method: "GET", Path: "/metrics", Class: management, Source: llama + " get_metrics; vLLM Prometheus /metrics"},
	{Method: "GET", Path: "/props", Class: management, Source: llama + " get_props"},
	{Method: "POST", Path: "/props", Class: management, Source: llama + " post_props"},
	{Method: "GET", Path: "/slots", Class: management, Source: llama + " get_slots (the prompts being processed)"},
	{Method: "POST", Path: "/slots/{id_slot}", Class: management, Source: llama + " post_slots (save/restore/erase)"},
	{Method: "GET", Path: "/lora-adapters", Class: management, Source: llama + " get_lora_adapters"},
	{Method: "POST", Path: "/lora-adapters", Class: management, Source: llama + " post_lora_adapters (global hot-swap)"},
	{Method: "POST", Path: "/v1/chat/completions/control", Class: management, Source: llama + " post_control (acts on running generations)"},
	{Method: "GET", Path: "/v1/stream/{conv_id}", Class: management, Source: llama + " stream_get (any caller's resumable stream)"},
	{Method: "GET", Path: "/v1/streams", Class: management, Source: llama + " streams_list"},
	{Method: "DELETE", Path: "/v1/stream/{conv_id}", Class: management, Source: llama + " stream_delete"},
	{Method: "GET", Path: "/cors-proxy", Class: management, Source: llama + " proxy_handler_get (experimental, fetches URLs)"},
	{Method: "POST", Path: "/cors-proxy", Class: management, Source: llama + " proxy_handler_post (experimental, fetches URLs)"},
	{Method: "GET", Path: "/tools", Class: management, Source: llama + " tools.handle_get (experimental built-in tools)"},
	{Method: "POST", Path: "/tools", Class: management, Source: llama + " tools.handle_post (experimental built-in tools)"},
	{Method: "POST", Path: "/models", Class: management, Source: llamaRouter + " post_router_models"},
	{Method: "DELETE", Path: "/models", Class: management, Source: llamaRouter + " del_router_models"},
	{Method: "POST", Path: "/models/load", Class: management, Source: llamaRouter + " post_router_models_load"},
	{Method: "POST", Path: "/models/unload", Class: management, Source: llamaRouter + " post_router_models_unload"},
	{Method: "GET", Path: "/models/sse", Class: management, Source: llamaRouter + " get_router_models_sse"},

	// Inference: completions and chat.
	{Method: "POST", Path: "/completion", Class: inference, Source: llama + " post_completions (legacy)"},
	{Method: "POST", Path: "/completions", Class: inference, Source: llama + " post_completions"},
	{Method: "POST", Path: "/v1/completions", Class: inference, Source: llama + " post_completions_oai; vLLM"},
	{Method: "POST", Path: "/chat/completions", Class: inference, Source: llama + " post_chat_completions"},
	{Method: "POST", Path: "/v1/chat/completions", Class: inference, Source: llama + " post_chat_completions; vLLM"},
	{Method: "POST", Path: "/v1/chat/completions/batch", Class: inference, Source: vllm},
	{Method: "POST", Path: "/v1/chat/completions/render", Class: inference, Source: vllm + " (template rendering)"},
	{Method: "POST", Path: "/v1/completions/render", Class: inference, Source: vllm + " (template rendering)"},
	{Method: "POST", Path: "/v1/responses", Class: inference, Source: llama + " post_responses_oai; vLLM"},
	{Method: "POST", Path: "/responses", Class: inference, Source: llama + " post_responses_oai"},
	{Method: "GET", Path: "/v1/responses/{response_id}", Class: management, Source: vllm + " (stored responses of every caller)"},
	{Method: "POST", Path: "/v1/responses/{response_id}/cancel", Class: management, Source: vllm + " (cancels any caller's response)"},
	{Method: "POST", Path: "/v1/messages", Class: inference, Source: llama + " post_anthropic_messages; vLLM"},
	{Method: "POST", Path: "/infill", Class: inference, Source: llama + " post_infill"},
	{Method: "POST", Path: "/inference/v1/generate", Class: inference, Source: vllm},
	{Method: "POST", Path: "/invocations", Class: inference, Source: vllm + " (SageMaker)"},
	{Method: "POST", Path: "/v1/decisions", Class: inference, Source: "vLLM docs/serving/online_serving/README.md (Decisions API)"},
	{Method: "GET", Path: "/v1/realtime", Class: inference, Source: "vLLM /v1/realtime WebSocket (realtime transcription)"},

	// Inference: audio.
	{Method: "POST", Path: "/v1/audio/transcriptions", Class: inference, Source: llama + " post_transcriptions_oai; vLLM"},
	{Method: "POST", Path: "/audio/transcriptions", Class: inference, Source: llama + " post_transcriptions_oai"},
	{Method: "POST", Path: "/v1/audio/translations", Class: inference, Source: vllm},

	// Inference: embeddings, rerank, scoring, pooling.
	{Method: "POST", Path: "/embedding", Class: inference, Source: llama + " post_embeddings (legacy)"},
	{Method: "POST", Path: "/embeddings", Class: inference, Source: llama + " post_embeddings"},
	{Method: "POST", Path: "/v1/embeddings", Class: inference, Source: llama + " post_embeddings_oai; vLLM"},
	{Method: "POST", Path: "/v2/embed", Class: inference, Source: vllm + " (Cohere embed)"},
	{Method: "POST", Path: "/rerank", Class: inference, Source: llama + " post_rerank; vLLM"},
	{Method: "POST", Path: "/reranking", Class: inference, Source: llama + " post_rerank"},
	{Method: "POST", Path: "/v1/rerank", Class: inference, Source: llama + " post_rerank; vLLM"},
	{Method: "POST", Path: "/v1/reranking", Class: inference, Source: llama + " post_rerank"},
	{Method: "POST", Path: "/v2/rerank", Class: inference, Source: vllm + " (Cohere rerank)"},
	{Method: "POST", Path: "/score", Class: inference, Source: vllm},
	{Method: "POST", Path: "/v1/score", Class: inference, Source: vllm},
	{Method: "POST", Path: "/generative_scoring", Class: inference, Source: vllm},
	{Method: "POST", Path: "/pooling", Class: inference, Source: vllm},
	{Method: "POST", Path: "/classify", Class: inference, Source: vllm},

	// Inference: tokenizer and template utilities (they need the loaded
	// model, so they are admitted only while lending).
	{Method: "POST", Path: "/tokenize", Class: inference, Source: llama + " post_tokenize; vLLM"},
	{Method: "POST", Path: "/detokenize", Class: inference, Source: llama + " post_detokenize; vLLM"},
	{Method: "POST", Path: "/apply-template", Class: inference, Source: llama + " post_apply_template"},
	{Method: "POST", Path: "/chat/completions/input_tokens", Class: inference, Source: llama + " post_chat_completions_tok"},
	{Method: "POST", Path: "/v1/chat/completions/input_tokens", Class: inference, Source: llama + " post_chat_completions_tok"},
	{Method: "POST", Path: "/responses/input_tokens", Class: inference, Source: llama + " post_responses_tok_oai"},
	{Method: "POST", Path: "/v1/responses/input_tokens", Class: inference, Source: llama + " post_responses_tok_oai"},
	{Method: "POST", Path: "/v1/messages/count_tokens", Class: inference, Source: llama + " post_anthropic_count_tokens; vLLM"},

	// vLLM operational control.
	{Method: "GET", Path: "/load", Class: management, Source: vllm + " /load (server load)"},
	{Method: "GET", Path: "/tokenizer_info", Class: management, Source: vllm + " (chat templates, tokenizer config)"},
	{Method: "POST", Path: "/v1/load_lora_adapter", Class: management, Source: vllm},
	{Method: "POST", Path: "/v1/unload_lora_adapter", Class: management, Source: vllm},
	{Method: "POST", Path: "/pause", Class: management, Source: vllm},
	{Method: "POST", Path: "/resume", Class: management, Source: vllm},
	{Method: "GET", Path: "/is_paused", Class: management, Source: vllm},
	{Method: "POST", Path: "/scale_elastic_ep", Class: management, Source: vllm},
	{Method: "POST", Path: "/is_scaling_elastic_ep", Class: management, Source: vllm},
	{Method: "POST", Path: "/init_weight_transfer_engine", Class: management, Source: vllm},
	{Method: "POST", Path: "/update_weights", Class: management, Source: vllm},
	{Method: "GET", Path: "/get_world_size", Class: management, Source: vllm},
	{Method: "POST", Path: "/abort_requests", Class: management, Source: vllm},
	{Method: "GET", Path: "/server_info", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/reset_prefix_cache", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/reset_mm_cache", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/reset_encoder_cache", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/sleep", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/wake_up", Class: management, Source: vllmDev},
	{Method: "GET", Path: "/is_sleeping", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/collective_rpc", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/start_profile", Class: management, Source: vllmDev},
	{Method: "POST", Path: "/stop_profile", Class: management, Source: vllmDev},
}
