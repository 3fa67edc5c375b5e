package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
)

// refreshInterval is the least time between two reads of the token files.
const refreshInterval = time.Second

// digest is the SHA-256 of a token.
type digest = [sha256.Size]byte

// token is one configured token as the matcher sees it. It never holds the
// secret, only its digest.
type token struct {
	name   string
	scopes scopeSet
	digest digest
	// active is false while the token's file is unreadable, empty or malformed.
	active bool
	// path is the resolved value_file, empty for value and value_env tokens.
	path string
}

// state is one immutable view of the authenticator's configuration. A request
// loads it once and is judged by it alone; a rotation or Update publishes a
// new one.
type state struct {
	trustLoopback bool
	allowAnon     bool
	sources       []netip.Prefix
	tokens        []token
}

// match compares d with every token's digest in constant time, without
// stopping early, and returns the index of the active token it equals, or -1.
func (s *state) match(d digest) int {
	found := -1
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(d[:], s.tokens[i].digest[:])
		if eq == 1 && s.tokens[i].active && found < 0 {
			found = i
		}
	}
	return found
}

func (s *state) sourceAllowed(a netip.Addr) bool {
	if len(s.sources) == 0 {
		return true
	}
	a = a.Unmap()
	for _, p := range s.sources {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fileWatch is what the refresher remembers about one value_file token
// between checks. It is touched only under Authenticator.refreshMu.
type fileWatch struct {
	// problem is the last problem logged for the file ("" when it was good),
	// so each distinct problem is logged once.
	problem string
	// short remembers the digest already warned about as short.
	short digest
}

// buildState turns a configuration into a state. Tokens must have their
// secrets loaded (config.Load does that), except value_file tokens.
func buildState(cfg config.Auth, log *slog.Logger) (*state, error) {
	s := &state{trustLoopback: cfg.TrustLoopback, allowAnon: cfg.AllowUnauthenticatedRemote}
	for i, src := range cfg.AllowedSources {
		p, err := config.ParseSource(src)
		if err != nil {
			return nil, fmt.Errorf("auth.allowed_sources[%d]: %w", i, err)
		}
		s.sources = append(s.sources, p)
	}
	names := map[string]bool{}
	for i, t := range cfg.Tokens {
		key := fmt.Sprintf("auth.token[%d]", i)
		if t.Name == "" || names[t.Name] {
			return nil, fmt.Errorf("%s.name: missing or duplicate token name %q", key, t.Name)
		}
		names[t.Name] = true
		tok := token{name: t.Name, path: t.FilePath}
		for _, name := range t.Scopes {
			sc, err := ParseScope(name)
			if err != nil {
				return nil, fmt.Errorf("%s.scopes: %w", key, err)
			}
			tok.scopes = tok.scopes.with(sc)
		}
		if tok.scopes == 0 {
			return nil, fmt.Errorf("%s.scopes: no scope", key)
		}
		// A value_file token without a loaded secret starts disabled; the
		// refresh that follows reads its file.
		secret := t.Secret
		if secret.IsZero() && t.FilePath == "" {
			return nil, fmt.Errorf("%s: token %q has no value loaded", key, t.Name)
		}
		if !secret.IsZero() {
			if problem := tokenProblem(secret.Reveal()); problem != "" {
				return nil, fmt.Errorf("%s: token %q %s", key, t.Name, problem)
			}
			tok.digest = sha256.Sum256([]byte(secret.Reveal()))
			tok.active = true
		}
		s.tokens = append(s.tokens, tok)
	}
	for i := range s.tokens {
		for j := range i {
			if s.tokens[i].active && s.tokens[j].active && s.tokens[i].digest == s.tokens[j].digest {
				log.Warn("two tokens have the same value; the first one listed is used", "token", s.tokens[j].name, "also", s.tokens[i].name)
			}
		}
	}
	return s, nil
}

// tokenProblem says what makes v unusable as a token, or "" when it is fine.
// It never includes the value.
func tokenProblem(v string) string {
	switch {
	case len(v) > config.MaxTokenLength:
		return fmt.Sprintf("is %d bytes; at most %d", len(v), config.MaxTokenLength)
	case !config.IsB64Token(v):
		return "contains characters outside RFC 6750's b64token set"
	}
	return ""
}

// refresh re-reads every value_file token of cur and returns the state to
// publish, or nil when nothing changed. It logs rotations and, once per
// distinct problem, files that cannot be used.
func refresh(cur *state, watches map[string]*fileWatch, log *slog.Logger) *state {
	var next *state
	for i, t := range cur.tokens {
		if t.path == "" {
			continue
		}
		w := watches[t.name]
		if w == nil {
			w = &fileWatch{}
			watches[t.name] = w
		}
		upd := t
		secret, err := config.ReadSecretFile(t.path)
		problem := ""
		if err != nil {
			problem = err.Error()
		} else if p := tokenProblem(secret.Reveal()); p != "" {
			problem = "the token in " + t.path + " " + p
		}
		if problem != "" {
			upd.active = false
			upd.digest = digest{}
			if problem != w.problem {
				log.Error("token disabled: its file cannot be used", "token", t.name, "path", t.path, "problem", problem)
				w.problem = problem
			}
		} else {
			upd.digest = sha256.Sum256([]byte(secret.Reveal()))
			upd.active = true
			switch {
			case !t.active:
				log.Info("token enabled again: its file is usable", "token", t.name, "path", t.path)
			case upd.digest != t.digest:
				log.Info("token rotated: its file changed", "token", t.name, "path", t.path)
			}
			w.problem = ""
			if n := len(secret.Reveal()); n < config.MinTokenLength && w.short != upd.digest {
				log.Warn("token is short; use vacancyd gen-token", "token", t.name, "path", t.path, "length", n, "minimum", config.MinTokenLength)
				w.short = upd.digest
			}
		}
		if upd.active == t.active && upd.digest == t.digest {
			continue
		}
		if next == nil {
			cp := *cur
			cp.tokens = append([]token(nil), cur.tokens...)
			next = &cp
		}
		next.tokens[i] = upd
	}
	return next
}

// fingerprint is the first 8 hex digits of a credential's SHA-256, safe to log.
func fingerprint(d digest) string { return hex.EncodeToString(d[:4]) }
