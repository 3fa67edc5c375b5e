package auth

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vacancyd/vacancyd/internal/config"
)

// Scope is a permission a token carries. No scope implies another.
type Scope uint8

// The scopes. The zero Scope is invalid and is judged as Admin.
const (
	Read Scope = iota + 1
	Borrow
	Admin
)

var allScopes = []Scope{Read, Borrow, Admin}

// String returns the scope's configuration name.
func (s Scope) String() string {
	switch s {
	case Read:
		return config.ScopeRead
	case Borrow:
		return config.ScopeBorrow
	case Admin:
		return config.ScopeAdmin
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// ParseScope parses a scope name as written in [[auth.token]] scopes.
func ParseScope(s string) (Scope, error) {
	for _, sc := range allScopes {
		if s == sc.String() {
			return sc, nil
		}
	}
	return 0, fmt.Errorf("unknown scope %q", s)
}

func (s Scope) valid() bool { return s >= Read && s <= Admin }

// scopeSet is a set of scopes as a bit mask.
type scopeSet uint8

func (ss scopeSet) has(s Scope) bool { return s.valid() && ss&(1<<s) != 0 }

func (ss scopeSet) with(s Scope) scopeSet { return ss | 1<<s }

func (ss scopeSet) list() []Scope {
	var out []Scope
	for _, s := range allScopes {
		if ss.has(s) {
			out = append(out, s)
		}
	}
	return out
}

// Via says how a caller was admitted.
type Via uint8

// The ways a caller is admitted.
const (
	// ViaToken: the caller presented a configured token carrying the scope.
	ViaToken Via = iota + 1
	// ViaLoopback: a direct client on the loopback interface, trusted by
	// trust_loopback.
	ViaLoopback
	// ViaAnonymous: a remote client admitted without a token because none is
	// configured and allow_unauthenticated_remote is set.
	ViaAnonymous
)

// String names the admission for logs and /status.
func (v Via) String() string {
	switch v {
	case ViaToken:
		return "token"
	case ViaLoopback:
		return "loopback"
	case ViaAnonymous:
		return "anonymous"
	}
	return fmt.Sprintf("Via(%d)", uint8(v))
}

// Principal is the caller a request was admitted as. It holds no secret.
type Principal struct {
	// Via is how the caller was admitted.
	Via Via
	// Token is the name of the token presented, when Via is ViaToken.
	Token string
	// Scopes are the token's scopes for ViaToken. For ViaLoopback they are
	// read and borrow, plus admin on macOS (on Linux and Windows loopback admin
	// is limited to the actions marked LoopbackAllowed). For ViaAnonymous they
	// are read and borrow.
	Scopes []Scope
	// Peer is the connection's remote address.
	Peer netip.AddrPort
}

// Has reports whether the principal holds scope s.
func (p Principal) Has(s Scope) bool {
	for _, x := range p.Scopes {
		if x == s {
			return true
		}
	}
	return false
}

// String describes the principal for logs: "token:NAME", "loopback" or
// "anonymous".
func (p Principal) String() string {
	if p.Via == ViaToken {
		return "token:" + p.Token
	}
	return p.Via.String()
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal Require stored in ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
