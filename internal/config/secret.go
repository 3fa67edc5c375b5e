package config

import (
	"fmt"
	"log/slog"
)

// Redacted is what every printed form of a Secret shows instead of its value.
const Redacted = "<redacted>"

// Secret holds a credential. Every way of printing it (fmt verbs, slog, JSON,
// text marshalling) shows Redacted; only Reveal returns the value.
//
// The value sits behind a pointer so that even reflection-based printing of a
// struct that contains a Secret (fmt's %!verb fallbacks) shows only an address.
type Secret struct {
	value *string
}

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{value: &s} }

// Reveal returns the secret value. Call it only where the value is used.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.Reveal() == "" }

// String implements fmt.Stringer.
func (s Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer, used by %#v.
func (s Secret) GoString() string { return `config.Secret("` + Redacted + `")` }

// Format implements fmt.Formatter so that no verb (%x, %q, %s) reaches the value.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(Redacted))
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler (TOML and other encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// UnmarshalText implements encoding.TextUnmarshaler so inline values decode from TOML.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = NewSecret(string(b))
	return nil
}
