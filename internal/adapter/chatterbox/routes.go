package chatterbox

import "github.com/vacancyd/vacancyd/internal/adapter"

const (
	inference  = adapter.ClassInference
	read       = adapter.ClassBorrowerRead
	management = adapter.ClassManagement
)

// src is devnen/Chatterbox-TTS-Server server.py (commit 3badba101dc1, read
// through the search tool), a FastAPI app.
const src = "Chatterbox-TTS-Server server.py"

// Routes is the Chatterbox TTS Server table.
var Routes = []adapter.Route{
	// Inference.
	{Method: "POST", Path: "/tts", Class: inference, Source: src + " custom_tts_endpoint"},
	{Method: "POST", Path: "/v1/audio/speech", Class: inference, Source: src + " openai_speech_endpoint (OpenAI-compatible)"},

	// Model and voice discovery.
	{Method: "GET", Path: "/api/model-info", Class: read, Source: src + " get_model_info_endpoint"},
	{Method: "GET", Path: "/get_predefined_voices", Class: read, Source: src + " get_predefined_voices_api (the voices the server ships)"},

	// The owner's configuration, files and model.
	{Method: "GET", Path: "/get_reference_files", Class: management, Source: src + " get_reference_files_api (the owner's uploaded voice samples)"},
	{Method: "GET", Path: "/api/ui/initial-data", Class: management, Source: src + " get_ui_initial_data (full config and file lists)"},
	{Method: "POST", Path: "/save_settings", Class: management, Source: src + " save_settings_endpoint"},
	{Method: "POST", Path: "/reset_settings", Class: management, Source: src + " reset_settings_endpoint"},
	{Method: "POST", Path: "/restart_server", Class: management, Source: src + " restart_server_endpoint (model hot-swap)"},
	{Method: "POST", Path: "/api/unload", Class: management, Source: src + " unload_model_endpoint"},
	{Method: "POST", Path: "/upload_reference", Class: management, Source: src + " upload_reference_audio_endpoint"},
	{Method: "POST", Path: "/upload_predefined_voice", Class: management, Source: src + " upload_predefined_voice_endpoint"},
	{Method: "GET", Path: "/", Class: management, Source: src + " get_web_ui (the owner's web UI)"},
	{Method: "GET", Path: "/outputs/...", Class: management, Source: src + ` StaticFiles mount "/outputs" (saved audio)`},
	{Method: "GET", Path: "/status", Class: management, Source: "named by SPEC section 4; not in devnen server.py at 3badba101dc1 (some forks serve it)"},
}
