// Package fakeupstream holds realistic fake inference servers for tests: the
// upstreams that vacancyd's gate sits in front of. Each fake listens on a real
// loopback socket (like httptest.Server), speaks the real server's API closely
// enough for the official clients (github.com/openai/openai-go/v3,
// github.com/ollama/ollama/api, a coder/websocket client for ComfyUI) to work
// against it, and records every request that reached it.
//
// The fakes were written against the real servers' sources:
//
//   - [StartOllama]: ollama/ollama v0.17.4 (server/routes.go GenerateRoutes,
//     api/types.go, openai/openai.go, middleware/openai.go). Native NDJSON
//     streaming on /api/generate and /api/chat (stream defaults to true;
//     "stream": false answers one JSON object), the model list (/api/tags,
//     /api/show, /v1/models), a loaded-model table (/api/ps) driven by
//     keep_alive exactly as the scheduler does (a default of 5m, a number is
//     seconds, a string is a Go duration, a negative value is forever, 0
//     unloads once the request ends, and an empty prompt or message list with
//     keep_alive 0 unloads at once with done_reason "unload"), embeddings,
//     pull/push/create/copy/delete (minimal but stateful), and the OpenAI
//     compatibility routes (/v1/chat/completions and /v1/completions as SSE,
//     /v1/models, /v1/embeddings). Errors are {"error":"..."}; under /v1 they
//     are OpenAI-shaped, with Ollama's own status code kept.
//   - [StartOpenAI]: llama.cpp's llama-server (tools/server: server.cpp route
//     table, server-http.cpp API-key middleware and 404 handler,
//     server-common.cpp error shape, server-task.cpp response shapes, and
//     README). /v1/chat/completions streams chat.completion.chunk objects as
//     "data: {...}\n\n" ending "data: [DONE]"; /completion is the native
//     stream (no [DONE]); also /v1/completions, embeddings, /v1/models and
//     /models, /health, /props, /slots, /metrics (Prometheus text), /tokenize,
//     /detokenize. Errors are {"error":{"code":..,"message":..,"type":..}}.
//   - [StartComfyUI]: comfyanonymous/ComfyUI (server.py PromptServer,
//     execution.py, main.py prompt_worker). A single worker runs queued
//     prompts in order; the WebSocket at /ws?clientId= gets "status" on
//     connect and on every queue change, and the execution events
//     ("execution_start", "execution_cached", "executing", "progress",
//     "executed" with output images, "execution_success" or
//     "execution_interrupted") go only to the client_id that queued the
//     prompt, as in the real server. /interrupt (global or by prompt_id)
//     stops the running prompt. Every route is served with and without the
//     /api prefix.
//   - [StartChatterbox]: devnen/Chatterbox-TTS-Server (server.py, models.py,
//     engine.py, utils.py). POST /tts and POST /v1/audio/speech answer WAV
//     audio sent in several chunks with Transfer-Encoding: chunked; the voice
//     lists, /api/ui/initial-data, /api/model-info (the server's status
//     route; it has no /health), uploads, settings and model unload/reload.
//     Errors are FastAPI's {"detail": "..."} (422 validation errors carry
//     FastAPI's list shape).
//
// # What every fake records
//
// Every request that reached a fake, authorised or not, is kept in order as a
// [Recorded] (method, path, raw and parsed query, headers, body, the status
// answered, and whether the client went away first). [Server.Requests],
// [Server.Count] and [Server.Reset] read and clear the log; all are safe for
// concurrent use.
//
// # Streams, holds and cancellation
//
// Generated output comes as tokens (Ollama and llama.cpp), sampler steps
// (ComfyUI) or audio chunks (Chatterbox). [WithTokens] sets how many,
// [WithTokenDelay] paces them, and [WithRelease] or [Server.Hold] keep every
// stream waiting after its first token until the test releases it, so a
// test can cancel a request mid-stream. When a handler sees its request's
// context end before it has finished, it counts the request as cancelled:
// [Server.Cancelled], [Server.Cancellations] and [Server.WaitCancelled] let
// reclaim tests prove the upstream saw the cancel. Nothing here measures
// time; delays only make streams long.
//
// # Credentials
//
// [WithBearer] or [WithBasicAuth] makes a fake require a credential. A
// request without it gets the real server's 401: llama.cpp's
// {"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}
// (its public routes /health, /v1/health, /models, /v1/models and / stay
// open, and X-Api-Key is accepted as llama.cpp does); for the servers that
// have no credential of their own the 401 is what a front proxy would send
// in the server's own error shape ({"error":"unauthorized"} for Ollama,
// which the Ollama client turns into api.AuthorizationError; aiohttp's
// "401: Unauthorized" for ComfyUI; {"detail":"Not authenticated"} for
// Chatterbox).
package fakeupstream
