package auth

import (
	"net"
	"net/netip"
)

// WarnIfExposed logs a WARN when a listener accepts connections from outside
// loopback, and reports whether it did. The daemon calls it once per listener
// after binding; name identifies the listener ("api", a gate's upstream id).
func (a *Authenticator) WarnIfExposed(name string, addr net.Addr) bool {
	ap, err := netip.ParseAddrPort(addr.String())
	if err == nil && IsLoopbackPeer(ap.Addr()) {
		return false
	}
	s := a.cur.Load()
	posture := "every request needs a token with the route's scope"
	switch {
	case len(s.tokens) == 0 && s.allowAnon:
		posture = "allow_unauthenticated_remote: any client that can reach it may read and borrow without a token"
	case len(s.tokens) == 0:
		posture = "no token is configured, so remote requests are refused"
	}
	args := []any{"listener", name, "addr", addr.String(), "tokens", len(s.tokens), "auth", posture}
	if len(s.sources) > 0 {
		args = append(args, "allowed_sources", len(s.sources))
	}
	a.log.Warn("listener accepts connections from outside loopback; credentials reach it unencrypted (no TLS)", args...)
	return true
}

// TokenStatus describes one configured token for /status. It never holds the
// secret.
type TokenStatus struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	// Source is "file" for value_file tokens and "config" for value and
	// value_env ones.
	Source string `json:"source"`
	// Active is false while a value_file token's file is unusable.
	Active bool `json:"active"`
}

// Posture summarises the authentication settings for /status.
type Posture struct {
	TrustLoopback              bool          `json:"trust_loopback"`
	AllowUnauthenticatedRemote bool          `json:"allow_unauthenticated_remote"`
	AllowedSources             []string      `json:"allowed_sources,omitempty"`
	Tokens                     []TokenStatus `json:"tokens"`
}

// Posture returns the authentication settings in force now.
func (a *Authenticator) Posture() Posture {
	s := a.cur.Load()
	p := Posture{TrustLoopback: s.trustLoopback, AllowUnauthenticatedRemote: s.allowAnon, Tokens: []TokenStatus{}}
	for _, src := range s.sources {
		p.AllowedSources = append(p.AllowedSources, src.String())
	}
	for _, t := range s.tokens {
		ts := TokenStatus{Name: t.name, Source: "config", Active: t.active}
		if t.path != "" {
			ts.Source = "file"
		}
		for _, sc := range t.scopes.list() {
			ts.Scopes = append(ts.Scopes, sc.String())
		}
		p.Tokens = append(p.Tokens, ts)
	}
	return p
}
