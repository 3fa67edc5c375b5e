// Package adapter sorts every borrower request that reaches a gate into one
// of four classes before anything is forwarded: inference (uses the GPU, so
// it is admitted only while lending), borrower read (model discovery, health,
// a client's own results: allowed to any authenticated borrower), management
// (refused with management_denied unless the upstream allows it) and unknown
// (refused as refused_route).
//
// Each upstream kind has a subpackage (ollama, openai, comfyui, chatterbox)
// whose route table is plain data: a []Route, one row per method and path of
// the real server, each row naming where in that server's source the route
// comes from. The rules every kind shares live here:
//
//   - A path that is not in canonical form (empty, "." or ".." segments,
//     backslashes, control characters) is unknown, whatever the method, so
//     the gate and the upstream never disagree about which route was meant.
//   - A request matching no row is management when its method is GET or HEAD
//     (a read the table does not list as a borrower read) and unknown
//     otherwise.
//   - HEAD matches rows for HEAD and for GET: aiohttp (ComfyUI), Starlette
//     (Chatterbox, vLLM) and cpp-httplib (llama.cpp) answer HEAD with the GET
//     handler; gin (Ollama) answers only the HEAD routes it registers, and a
//     HEAD it lacks fails there harmlessly.
//   - When several rows match, the most restrictive class wins: management
//     over inference over borrower read.
//
// Route paths are exact ("/api/tags") or patterns: a segment "{name}" matches
// exactly one segment and records it under name in Decision.Params; a final
// segment "..." matches one or more further segments. Matching is on the
// decoded URL path, case-sensitive, with no trailing-slash folding.
//
// Adapters may also look inside a request body (Ollama hides unloads, cloud
// models and keep_alive in bodies); a body they must read but cannot parse is
// refused as malformed. Adapters are pure: Classify and ErrorBody do no I/O
// and are safe for concurrent use. The reclaim side (Reclaimer: list loaded
// models, unload, cancel and watch jobs) is what talks to the upstream.
//
// Kinds register themselves with Register; import
// github.com/vacancyd/vacancyd/internal/adapter/all to link every kind and use
// For to build one.
package adapter
