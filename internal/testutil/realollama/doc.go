// Package realollama runs a real Ollama server for vacancyd's end-to-end
// tests: a pinned release (Version) built from its Go module with cgo and
// cached under the repository's .bin directory, started on a free loopback
// port with its own temporary models directory and home, loaded with the
// project's generated tiny GGUF model (internal/testutil/gguf) through
// Ollama's own API, and stopped cleanly at cleanup. Nothing is downloaded
// at run time except, when the cache is empty, the Ollama module itself
// (scripts/test builds it before the tests run).
//
// Its log (stdout and stderr, with OLLAMA_DEBUG=1) is captured: Log.Requests
// parses the request lines of Ollama's HTTP router (gin), so tests can count
// what reached Ollama. A Tap sits between a gate and Ollama: a transparent
// TCP relay that records every byte each way, so tests can prove what a gate
// sent upstream (no borrower credential, no request at all) and when it hung
// up on an unfinished answer (a cancelled stream).
//
// The harness runs on Linux only (process groups, flock, the e2e suite).
// Where the binary cannot be built, Binary skips the test with the reason,
// unless VACANCYD_REQUIRE_TOOLS=1, which makes it a failure.
package realollama
