package adapter

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Adapter knows one upstream kind's routes and error style. Implementations
// are pure (no I/O) and safe for concurrent use.
//
// Observing models, tracking completion, cancelling and unloading are not
// part of Adapter: they talk to the upstream, so they are the separate
// Reclaimer interface (reclaimer.go), implemented by the same per-kind
// packages, and classification stays a pure function of the request.
type Adapter interface {
	// Kind is the config kind the adapter serves (config.KindOllama, ...).
	Kind() string
	// Routes returns a copy of the kind's route table.
	Routes() []Route
	// Classify decides what r is. It never panics and never reads beyond r.
	Classify(r *Request) Decision
	// ErrorBody renders an error in the upstream's own JSON shape, so that
	// the clients people use against that upstream parse it as a normal API
	// error. errType is a stable reason (management_denied, owner_present);
	// message is for humans. status is the HTTP status that will carry it.
	// path is the request's path, for servers whose error shape depends on
	// the route (Ollama's OpenAI-compatible /v1 routes).
	ErrorBody(path string, status int, errType, message string) (contentType string, body []byte)
}

// Request is what an adapter sees of a borrower request. The gate fills it
// after authentication and after buffering the body within its limits.
// Adapters never modify it.
type Request struct {
	// Method is the HTTP method as received (case-sensitive, like the
	// upstream routers).
	Method string
	// Path is the decoded URL path (http.Request.URL.Path).
	Path string
	// RawQuery is the encoded query without '?'.
	RawQuery string
	// Header holds the request headers (Content-Type, Content-Encoding).
	Header http.Header
	// Body is the complete request body; nil when there is none.
	Body []byte
}

// NewRequest builds a Request from an incoming request and its buffered body.
func NewRequest(r *http.Request, body []byte) *Request {
	return &Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header,
		Body:     body,
	}
}

// Decision is an adapter's verdict on one request.
type Decision struct {
	// Class is what the request is.
	Class Class
	// Reason explains the class for logs ("listed route", "unload: keep_alive
	// 0 without a prompt"); never shown as-is to borrowers.
	Reason string
	// Pattern is the Path of the matching table row; empty when none matched.
	Pattern string
	// Params holds the values of the pattern's {name} segments.
	Params map[string]string
	// OwnResults is set when the route reads results that a borrower may see
	// only if it created them through the gate (ComfyUI history, outputs and
	// event stream); the gate enforces ownership.
	OwnResults bool
	// Malformed is set when the adapter had to read the body (or query) to
	// classify the request and could not; Class is then ClassUnknown and the
	// gate refuses the request as a bad request (refused_request).
	Malformed bool
	// RewrittenBody, when non-nil, replaces the request body on its way
	// upstream (for example a borrower's keep_alive capped). It is only ever
	// set on inference and borrower-read decisions.
	RewrittenBody []byte
	// Model is the model the request names, when the adapter parsed it.
	Model string
}

// Options configures an adapter.
type Options struct {
	// MaxKeepAlive caps how long a borrower may ask an upstream to keep a
	// model loaded (Ollama keep_alive). Zero means DefaultMaxKeepAlive;
	// negative is an error.
	MaxKeepAlive time.Duration
}

// DefaultMaxKeepAlive is the keep_alive cap when Options leaves it zero. It
// equals Ollama's own default keep_alive.
const DefaultMaxKeepAlive = 5 * time.Minute

// KeepAliveCap returns the effective cap: MaxKeepAlive, or the default when
// zero. It reports an error for a negative value.
func (o Options) KeepAliveCap() (time.Duration, error) {
	switch {
	case o.MaxKeepAlive < 0:
		return 0, fmt.Errorf("adapter: max keep_alive %v is negative", o.MaxKeepAlive)
	case o.MaxKeepAlive == 0:
		return DefaultMaxKeepAlive, nil
	}
	return o.MaxKeepAlive, nil
}

// Factory builds an adapter of one kind.
type Factory func(Options) (Adapter, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a kind available to For. It is called from the init
// function of each kind's package and panics on an empty kind, a nil
// factory or a kind registered twice.
func Register(kind string, f Factory) {
	if kind == "" || f == nil {
		panic("adapter: Register with empty kind or nil factory")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic("adapter: Register called twice for kind " + kind)
	}
	registry[kind] = f
}

// For builds the adapter for kind. The kind's package must be linked in;
// importing internal/adapter/all links every kind.
func For(kind string, opts Options) (Adapter, error) {
	registryMu.RLock()
	f := registry[kind]
	registryMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("adapter: unknown kind %q (registered: %v)", kind, Kinds())
	}
	a, err := f(opts)
	if err != nil {
		return nil, fmt.Errorf("adapter %s: %w", kind, err)
	}
	return a, nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	kinds := make([]string, 0, len(registry))
	for k := range registry {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// StreamCutter is implemented by adapters whose streamed answers can carry
// an error as their last element (Ollama's NDJSON). When a reclaim cuts a
// stream, the gate appends it so the borrower's client reports an error
// instead of taking the truncated answer as complete.
type StreamCutter interface {
	// StreamError returns the bytes to append to a stream of contentType,
	// or nil when that stream has no error form.
	StreamError(contentType, errType, message string) []byte
}
