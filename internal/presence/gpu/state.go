package gpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// State is what the GPU-pressure state file says:
//
//	{"pressure": true, "reason": "rendering", "expires": "2026-12-01T18:00:00Z", "resource": "gpu0"}
//
// "pressure" is required; the rest are optional. "expires" (RFC 3339) is
// when the statement stops holding: a file past it is stale, which the
// source reports as not ready (fail closed), so a tool that writes it must
// rewrite it before then, or omit "expires". "resource" limits the
// pressure to one resource id; without it, pressure is on every resource.
type State struct {
	Pressure bool
	Reason   string
	Expires  time.Time // zero: never
	Resource string    // empty: every resource
}

// Limits on the state file.
const (
	maxStateBytes  = 64 << 10
	maxReasonBytes = 200
)

var stateKeys = []string{"pressure", "reason", "expires", "resource"}

// ParseState decodes a state file strictly: one JSON object, the keys above
// exactly (an unknown or misspelt key is an error, not ignored), no null
// values, nothing after the object. Control characters in the reason
// become spaces and a long reason is cut.
func ParseState(b []byte) (State, error) {
	if len(b) > maxStateBytes {
		return State{}, fmt.Errorf("larger than %d bytes", maxStateBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return State{}, errors.New("empty file")
		}
		return State{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return State{}, errors.New("not a JSON object: null")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return State{}, errors.New("data after the JSON object")
	}
	if err := exactKeys(b); err != nil {
		return State{}, err
	}
	for k, v := range m {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return State{}, fmt.Errorf("%q: null", k)
		}
	}
	var st State
	raw, ok := m["pressure"]
	if !ok {
		return State{}, errors.New(`"pressure" is missing`)
	}
	if err := json.Unmarshal(raw, &st.Pressure); err != nil {
		return State{}, errors.New(`"pressure": must be true or false`)
	}
	if raw, ok := m["reason"]; ok {
		if err := json.Unmarshal(raw, &st.Reason); err != nil {
			return State{}, errors.New(`"reason": must be a string`)
		}
		st.Reason = cleanReason(st.Reason)
	}
	if raw, ok := m["resource"]; ok {
		if err := json.Unmarshal(raw, &st.Resource); err != nil || st.Resource == "" {
			return State{}, errors.New(`"resource": must be a resource id`)
		}
	}
	if raw, ok := m["expires"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return State{}, errors.New(`"expires": must be an RFC 3339 time string`)
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return State{}, fmt.Errorf(`"expires": %q is not an RFC 3339 time (2026-12-01T18:00:00Z)`, s)
		}
		st.Expires = t
	}
	return st, nil
}

// exactKeys checks the object's keys against stateKeys byte for byte
// (encoding/json matches field names case-insensitively) and rejects
// duplicates.
func exactKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if !slices.Contains(stateKeys, k) {
			return fmt.Errorf("unknown key %q (known: %s)", k, strings.Join(stateKeys, ", "))
		}
		if seen[k] {
			return fmt.Errorf("key %q given twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

func cleanReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxReasonBytes {
		return s
	}
	cut := maxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
