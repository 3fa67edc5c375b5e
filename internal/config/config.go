// Package config defines vacancyd's configuration file: its types and defaults,
// a strict TOML loader that resolves secrets, and Validate, which reports every
// problem at once, each at its key path (upstream[1].target: ...).
package config

import (
	"time"
)

// Scopes a token may carry. None implies another.
const (
	ScopeRead   = "read"
	ScopeBorrow = "borrow"
	ScopeAdmin  = "admin"
)

// Upstream kinds (adapters).
const (
	KindOllama     = "ollama"
	KindOpenAI     = "openai"
	KindComfyUI    = "comfyui"
	KindChatterbox = "chatterbox"
)

// Presence sources.
const (
	SourceSession      = "session"
	SourceInputDevices = "input-devices"
	SourcePrograms     = "programs"
)

// Config is the whole vacancyd configuration.
type Config struct {
	Server    Server     `toml:"server" json:"server"`
	Auth      Auth       `toml:"auth" json:"auth"`
	Upstreams []Upstream `toml:"upstream" json:"upstream"`
	Lending   Lending    `toml:"lending" json:"lending"`
	Presence  Presence   `toml:"presence" json:"presence"`
	Resources []Resource `toml:"resource" json:"resource"`

	// Path is the file the configuration came from; empty for the embedded default.
	Path string `toml:"-" json:"-"`
	// Dir is the directory relative paths resolve from.
	Dir string `toml:"-" json:"-"`
}

// Server is the [server] section.
type Server struct {
	// Listen is the API listener (status, metrics, admin), host:port.
	Listen string `toml:"listen" json:"listen"`
	// AdminSocket is the Linux admin socket's absolute path.
	AdminSocket string `toml:"admin_socket" json:"admin_socket"`
	// AdminGroup names the local administrators' group; empty means root only.
	AdminGroup string `toml:"admin_group" json:"admin_group"`
	Limits     Limits `toml:"limits" json:"limits"`
}

// Limits is [server.limits]: what one client may hold on a listener.
type Limits struct {
	// MaxConnections caps open connections per listener (API and each gate).
	MaxConnections int `toml:"max_connections" json:"max_connections"`
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout Duration `toml:"header_timeout" json:"header_timeout"`
	// MaxBodyBytes caps one request body.
	MaxBodyBytes int64 `toml:"max_body_bytes" json:"max_body_bytes"`
	// BodyTimeout bounds how long a client may take to send a body.
	BodyTimeout Duration `toml:"body_timeout" json:"body_timeout"`
	// ResponseIdleTimeout is how long a response may sit unread before the
	// connection is cut.
	ResponseIdleTimeout Duration `toml:"response_idle_timeout" json:"response_idle_timeout"`
	// IdleTimeout closes keep-alive connections with no request in flight.
	IdleTimeout Duration `toml:"idle_timeout" json:"idle_timeout"`
	// BodyBudgetBytes caps request-body bytes held across all gates at once.
	BodyBudgetBytes int64 `toml:"body_budget_bytes" json:"body_budget_bytes"`
}

// Auth is the [auth] section.
type Auth struct {
	// TrustLoopback lets direct loopback clients read, borrow and pause without a token.
	TrustLoopback bool `toml:"trust_loopback" json:"trust_loopback"`
	// AllowUnauthenticatedRemote lets remote clients read and borrow without a
	// token when none is configured. Never admin.
	AllowUnauthenticatedRemote bool `toml:"allow_unauthenticated_remote" json:"allow_unauthenticated_remote"`
	// AllowedSources, when set, is a CIDR allowlist for non-loopback callers.
	AllowedSources []string `toml:"allowed_sources" json:"allowed_sources"`
	Tokens         []Token  `toml:"token" json:"token"`
}

// Token is one [[auth.token]].
type Token struct {
	Name   string   `toml:"name" json:"name"`
	Scopes []string `toml:"scopes" json:"scopes"`
	// Exactly one of Value, ValueEnv, ValueFile.
	Value     Secret `toml:"value" json:"value,omitzero"`
	ValueEnv  string `toml:"value_env" json:"value_env,omitempty"`
	ValueFile string `toml:"value_file" json:"value_file,omitempty"`

	// Secret is the loaded token value, whichever source it came from.
	Secret Secret `toml:"-" json:"-"`
	// FilePath is ValueFile resolved against the config directory.
	FilePath string `toml:"-" json:"-"`
}

// HasScope reports whether the token carries scope.
func (t Token) HasScope(scope string) bool {
	for _, s := range t.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// Upstream is one [[upstream]]: an inference server and the gate in front of it.
type Upstream struct {
	ID     string `toml:"id" json:"id"`
	Listen string `toml:"listen" json:"listen"`
	Target string `toml:"target" json:"target"`
	Kind   string `toml:"kind" json:"kind"`
	// Resource names the [[resource]] this upstream's work runs on.
	Resource string `toml:"resource" json:"resource"`
	// Management is "deny" (default) or "allow".
	Management string `toml:"management" json:"management"`
	// ForwardAuthorization passes the borrower's Authorization and X-Api-Key upstream.
	ForwardAuthorization bool `toml:"forward_authorization" json:"forward_authorization"`
	// MaxKeepAlive caps a borrower's Ollama keep_alive.
	MaxKeepAlive Duration    `toml:"max_keep_alive" json:"max_keep_alive"`
	Credential   *Credential `toml:"credential" json:"credential,omitempty"`
}

// AllowsManagement reports whether borrowers may use the upstream's management routes.
func (u Upstream) AllowsManagement() bool { return u.Management == "allow" }

// Credential is [upstream.credential]: what vacancyd presents to the upstream.
type Credential struct {
	// Scheme is "bearer" or "basic".
	Scheme   string `toml:"scheme" json:"scheme"`
	Username string `toml:"username" json:"username,omitempty"`
	// Exactly one of ValueFile, ValueEnv. There is no inline form.
	ValueFile string `toml:"value_file" json:"value_file,omitempty"`
	ValueEnv  string `toml:"value_env" json:"value_env,omitempty"`

	Secret   Secret `toml:"-" json:"-"`
	FilePath string `toml:"-" json:"-"`
}

// Lending is the [lending] section: when the GPU may be lent.
type Lending struct {
	// Enabled is whether lending is on at startup.
	Enabled bool `toml:"enabled" json:"enabled"`
	// IdleAfter is how long the owner must be idle before lending starts.
	IdleAfter Duration `toml:"idle_after" json:"idle_after"`
	// ReclaimGrace is how long in-flight borrowed work may run after the owner returns.
	ReclaimGrace Duration `toml:"reclaim_grace" json:"reclaim_grace"`
	// RetryAfter is the Retry-After hint on a 503 while not lending.
	RetryAfter Duration `toml:"retry_after" json:"retry_after"`
	// UnloadTimeout bounds cancel and unload calls during a reclaim; work whose end
	// is not confirmed by then is held.
	UnloadTimeout Duration `toml:"unload_timeout" json:"unload_timeout"`
	// ResumeAfter keeps a resource from being lent again for this long after
	// a reclaim finished, so that a flickering input (a short GPU spike, a
	// brief return to the desk) does not make lending flap. Zero: lending
	// returns as soon as every input allows it.
	ResumeAfter Duration `toml:"resume_after" json:"resume_after"`
	// Windows, when any are set, restrict lending to those times.
	Windows []Window `toml:"window" json:"window"`
}

// Window is one [[lending.window]]: lending allowed on Days from Start to End
// (local time, "HH:MM"; End before Start crosses midnight).
type Window struct {
	Days  []string `toml:"days" json:"days"`
	Start string   `toml:"start" json:"start"`
	End   string   `toml:"end" json:"end"`
}

// Presence is the [presence] section: how the owner's presence and GPU use are seen.
type Presence struct {
	// Sources lists presence inputs: "session", "input-devices", "programs".
	// Empty declares a headless box with no presence input.
	Sources []string `toml:"sources" json:"sources"`
	// WhenUnknown is "hold" (default) or "lend": what to do while no source knows.
	WhenUnknown string `toml:"when_unknown" json:"when_unknown"`
	// SessionTimeout expires a session reporter that has gone quiet.
	SessionTimeout Duration `toml:"session_timeout" json:"session_timeout"`
	// InputDevices is the glob of evdev devices the service watches.
	InputDevices string `toml:"input_devices" json:"input_devices"`
	// Programs are process names whose running means the owner is using the machine.
	Programs []string `toml:"programs" json:"programs"`
	// GPUPressureFile is a JSON state file any tool may write to signal GPU pressure.
	GPUPressureFile string `toml:"gpu_pressure_file" json:"gpu_pressure_file"`
	// NVML is "auto" (use it where a driver exists) or "off".
	NVML string `toml:"nvml" json:"nvml"`
	// GPUMemoryThresholdMiB is the owner's GPU memory use that counts as pressure.
	GPUMemoryThresholdMiB int `toml:"gpu_memory_threshold_mib" json:"gpu_memory_threshold_mib"`
	// GPUUtilizationPercent is the GPU utilization by the owner's processes that
	// counts as pressure.
	GPUUtilizationPercent int `toml:"gpu_utilization_percent" json:"gpu_utilization_percent"`

	// GPUPressurePath is GPUPressureFile resolved against the config directory.
	GPUPressurePath string `toml:"-" json:"-"`
}

// Resource is one [[resource]]: a GPU that work is lent on.
type Resource struct {
	ID string `toml:"id" json:"id"`
	// Enabled is whether the resource is lent at startup (default true).
	Enabled *bool `toml:"enabled" json:"enabled,omitempty"`
	// GPUIndex is the NVML device index (default 0).
	GPUIndex int `toml:"gpu_index" json:"gpu_index"`
}

// IsEnabled reports the resource's startup switch.
func (r Resource) IsEnabled() bool { return r.Enabled == nil || *r.Enabled }

// Defaults returns a Config with every default set and no upstreams, tokens or
// resources; loading decodes the file over it.
func Defaults() Config {
	return Config{
		Server: Server{
			Listen:      "127.0.0.1:9811",
			AdminSocket: "/run/vacancyd/admin.sock",
			AdminGroup:  "vacancyd-admin",
			Limits: Limits{
				MaxConnections:      256,
				HeaderTimeout:       D(10 * time.Second),
				MaxBodyBytes:        32 << 20,
				BodyTimeout:         D(60 * time.Second),
				ResponseIdleTimeout: D(60 * time.Second),
				IdleTimeout:         D(120 * time.Second),
				BodyBudgetBytes:     256 << 20,
			},
		},
		Auth: Auth{TrustLoopback: true},
		Lending: Lending{
			Enabled:       true,
			IdleAfter:     D(5 * time.Minute),
			ReclaimGrace:  D(5 * time.Second),
			RetryAfter:    D(30 * time.Second),
			UnloadTimeout: D(10 * time.Second),
			ResumeAfter:   D(0),
		},
		Presence: Presence{
			Sources:               []string{SourceSession, SourceInputDevices},
			WhenUnknown:           "hold",
			SessionTimeout:        D(30 * time.Second),
			InputDevices:          "/dev/input/event*",
			NVML:                  "auto",
			GPUMemoryThresholdMiB: 256,
			GPUUtilizationPercent: 10,
		},
	}
}

// Per-element defaults for array tables, applied after decoding.
const (
	defaultManagement   = "deny"
	defaultMaxKeepAlive = 5 * time.Minute
	defaultResourceID   = "gpu0"
)

func (c *Config) applyElementDefaults() {
	if len(c.Resources) == 0 {
		c.Resources = []Resource{{ID: defaultResourceID}}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Management == "" {
			u.Management = defaultManagement
		}
		if u.MaxKeepAlive.text == "" {
			u.MaxKeepAlive = D(defaultMaxKeepAlive)
		}
		if u.Resource == "" && len(c.Resources) == 1 {
			u.Resource = c.Resources[0].ID
		}
	}
}
