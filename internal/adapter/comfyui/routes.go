package comfyui

import (
	"strings"

	"github.com/vacancyd/vacancyd/internal/adapter"
)

const (
	inference  = adapter.ClassInference
	read       = adapter.ClassBorrowerRead
	management = adapter.ClassManagement
)

// Sources checked through the search tool in comfyanonymous/ComfyUI.
const (
	// server is PromptServer.__init__ in server.py (2025 revision with
	// /features and targeted /interrupt).
	server = "ComfyUI server.py PromptServer"
	users  = "ComfyUI app/user_manager.py UserManager.add_routes"
	sets   = "ComfyUI app/app_settings.py AppSettings.add_routes"
	models = "ComfyUI app/model_manager.py ModelFileManager.add_routes"
	nodes  = "ComfyUI app/custom_node_manager.py CustomNodeManager.add_routes"
	intern = "ComfyUI api_server/routes/internal/internal_routes.py (sub-app at /internal)"
	assets = "ComfyUI app/assets/api/routes.py (registered only under /api)"
)

// prefixed are the routes ComfyUI registers on its RouteTableDef; its
// add_routes registers every one of them twice, as is and under "/api"
// (server.py PromptServer.add_routes). GET / (the frontend) and the static
// file routes are not listed: an unlisted read is management anyway.
var prefixed = []adapter.Route{
	// A client's own results: the gate lets a borrower see only prompts it
	// queued through the gate, and namespaces WebSocket client ids.
	{Method: "GET", Path: "/ws", Class: read, OwnResults: true, Source: server + " websocket_handler (progress events of the client's prompts)"},
	{Method: "GET", Path: "/history/{prompt_id}", Class: read, OwnResults: true, Source: server + " get_history_prompt_id"},
	{Method: "GET", Path: "/view", Class: read, OwnResults: true, Source: server + " view_image (output files)"},

	// Model and node discovery.
	{Method: "GET", Path: "/embeddings", Class: read, Source: server + " get_embeddings"},
	{Method: "GET", Path: "/models", Class: read, Source: server + " list_model_types"},
	{Method: "GET", Path: "/models/{folder}", Class: read, Source: server + " get_models"},
	{Method: "GET", Path: "/object_info", Class: read, Source: server + " get_object_info"},
	{Method: "GET", Path: "/object_info/{node_class}", Class: read, Source: server + " get_object_info_node"},
	{Method: "GET", Path: "/features", Class: read, Source: server + " get_features (server feature flags; a cheap health probe)"},
	{Method: "GET", Path: "/experiment/models", Class: read, Source: models + " get_model_folders"},
	{Method: "GET", Path: "/experiment/models/{folder}", Class: read, Source: models + " get_all_models"},

	// Inference.
	{Method: "POST", Path: "/prompt", Class: inference, Source: server + " post_prompt (queues a workflow)"},

	// The owner's queue, history, uploads, machine and settings.
	{Method: "GET", Path: "/prompt", Class: management, Source: server + " get_prompt (queue length: the owner's activity)"},
	{Method: "GET", Path: "/queue", Class: management, Source: server + " get_queue (every client's prompts)"},
	{Method: "POST", Path: "/queue", Class: management, Source: server + " post_queue (clear/delete any prompt)"},
	{Method: "GET", Path: "/history", Class: management, Source: server + " get_history (every client's history)"},
	{Method: "POST", Path: "/history", Class: management, Source: server + " post_history (clear/delete history)"},
	{Method: "POST", Path: "/interrupt", Class: management, Source: server + " post_interrupt (stops whatever runs, not only the caller's)"},
	{Method: "POST", Path: "/free", Class: management, Source: server + " post_free (unloads models)"},
	{Method: "POST", Path: "/upload/image", Class: management, Source: server + " upload_image"},
	{Method: "POST", Path: "/upload/mask", Class: management, Source: server + " upload_mask"},
	{Method: "GET", Path: "/system_stats", Class: management, Source: server + " system_stats (RAM/VRAM use, argv)"},
	{Method: "GET", Path: "/extensions", Class: management, Source: server + " get_extensions"},
	{Method: "GET", Path: "/view_metadata/{folder_name}", Class: management, Source: server + " view_metadata"},
	{Method: "POST", Path: "/internal/models/download", Class: management, Source: server + " download_handler (older server.py)"},
	{Method: "GET", Path: "/users", Class: management, Source: users + " get_users"},
	{Method: "POST", Path: "/users", Class: management, Source: users + " post_users"},
	{Method: "GET", Path: "/userdata", Class: management, Source: users + " listuserdata (workflows)"},
	{Method: "GET", Path: "/v2/userdata", Class: management, Source: users + " list_userdata_v2"},
	{Method: "GET", Path: "/userdata/...", Class: management, Source: users + " getuserdata (the file name may hold encoded slashes)"},
	{Method: "POST", Path: "/userdata/...", Class: management, Source: users + " post_userdata, move_userdata"},
	{Method: "DELETE", Path: "/userdata/...", Class: management, Source: users + " delete_userdata"},
	{Method: "GET", Path: "/settings", Class: management, Source: sets + " get_settings"},
	{Method: "GET", Path: "/settings/{id}", Class: management, Source: sets + " get_setting"},
	{Method: "POST", Path: "/settings", Class: management, Source: sets + " post_settings"},
	{Method: "POST", Path: "/settings/{id}", Class: management, Source: sets + " post_setting"},
	{Method: "GET", Path: "/experiment/models/preview/...", Class: management, Source: models + " get_model_preview"},
	{Method: "GET", Path: "/workflow_templates", Class: management, Source: nodes + " get_workflow_templates"},
	{Method: "GET", Path: "/i18n", Class: management, Source: nodes + " get_i18n"},
}

// unprefixed are registered on one path only.
var unprefixed = []adapter.Route{
	// The internal sub-app: logs, folder paths, file listings.
	{Method: "GET", Path: "/internal/...", Class: management, Source: intern + " (logs, logs/raw, folder_paths, files)"},
	{Method: "POST", Path: "/internal/...", Class: management, Source: intern},
	{Method: "PATCH", Path: "/internal/...", Class: management, Source: intern + " (logs/subscribe)"},
	// The assets API.
	{Method: "GET", Path: "/api/assets", Class: management, Source: assets + " list_assets_route"},
	{Method: "POST", Path: "/api/assets", Class: management, Source: assets + " upload_asset"},
	{Method: "HEAD", Path: "/api/assets/...", Class: management, Source: assets + " head_asset_by_hash"},
	{Method: "GET", Path: "/api/assets/...", Class: management, Source: assets + " get_asset_route, download_asset_content, tags"},
	{Method: "POST", Path: "/api/assets/...", Class: management, Source: assets + " create_asset_from_hash, tags, seed"},
	{Method: "PUT", Path: "/api/assets/...", Class: management, Source: assets + " update_asset"},
	{Method: "PATCH", Path: "/api/assets/...", Class: management, Source: assets},
	{Method: "DELETE", Path: "/api/assets/...", Class: management, Source: assets + " delete_asset, tags"},
}

// Routes is the ComfyUI route table: every prefixed row as is and under
// "/api", then the rows registered on a single path.
var Routes = withAPIPrefix(prefixed, unprefixed)

func withAPIPrefix(rows, single []adapter.Route) []adapter.Route {
	out := make([]adapter.Route, 0, 2*len(rows)+len(single))
	out = append(out, rows...)
	for _, r := range rows {
		r.Path = "/api" + r.Path
		r.Source = strings.Replace(r.Source, "ComfyUI ", "ComfyUI (under /api, server.py add_routes) ", 1)
		out = append(out, r)
	}
	return append(out, single...)
}
