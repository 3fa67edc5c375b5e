package admin

// Strict decoding of a request: see protocol.go for the rules.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// actionFields lists each kind's fields and whether each is required.
var actionFields = map[string]map[string]bool{
	KindPause:          {},
	KindResume:         {},
	KindSetResource:    {"resource": true, "enabled": true},
	KindReleaseWork:    {"id": true, "upstream_stopped": false},
	KindSaveSettings:   {"settings": true},
	KindStartDebug:     {"minutes": true},
	KindEndDebug:       {},
	KindReportPresence: {"idle_seconds": true, "source": true, "inhibited": false},
}

// Kinds returns the action kinds this build knows, sorted.
func Kinds() []string { return sortedKeys(actionFields) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func invalid(format string, args ...any) error {
	return &Error{Kind: ErrInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// DecodeRequest decodes and checks one request. Its errors are *Error with
// kind invalid_request, unsupported_protocol_version or unknown_action.
func DecodeRequest(b []byte) (Request, error) {
	if len(b) > MaxRequestBytes {
		return Request{}, invalid("the request is larger than %d bytes", MaxRequestBytes)
	}
	top, err := objectFields(b)
	if err != nil {
		return Request{}, invalid("the request must be one JSON object: %v", err)
	}
	rawV, ok := top["protocol_version"]
	if !ok {
		return Request{}, invalid(`the request has no "protocol_version"; this service speaks %d`, ProtocolVersion)
	}
	var v int
	if err := strictValue(rawV, &v); err != nil {
		return Request{}, invalid(`"protocol_version" must be an integer: %v`, err)
	}
	if v != ProtocolVersion {
		return Request{}, &Error{Kind: ErrUnsupportedVersion, Msg: fmt.Sprintf("protocol version %d is not supported; this service speaks %d", v, ProtocolVersion)}
	}
	for _, k := range sortedKeys(top) {
		if k != "protocol_version" && k != "action" {
			return Request{}, invalid("unknown field %q in the request", k)
		}
	}
	rawA, ok := top["action"]
	if !ok {
		return Request{}, invalid(`the request has no "action"`)
	}
	fields, err := objectFields(rawA)
	if err != nil {
		return Request{}, invalid(`"action" must be a JSON object: %v`, err)
	}
	var a Action
	rawK, ok := fields["kind"]
	if !ok {
		return Request{}, invalid(`the action has no "kind"`)
	}
	if err := strictValue(rawK, &a.Kind); err != nil {
		return Request{}, invalid(`"kind" must be a string: %v`, err)
	}
	allowed, known := actionFields[a.Kind]
	if !known {
		return Request{}, &Error{Kind: ErrUnknownAction, Msg: fmt.Sprintf("unknown action kind %q; known kinds: %s", a.Kind, strings.Join(Kinds(), ", "))}
	}
	for _, k := range sortedKeys(fields) {
		if _, ok := allowed[k]; !ok && k != "kind" {
			return Request{}, invalid("action %s takes no field %q", a.Kind, k)
		}
	}
	for _, k := range sortedKeys(allowed) {
		if _, ok := fields[k]; allowed[k] && !ok {
			return Request{}, invalid("action %s needs the field %q", a.Kind, k)
		}
	}
	for _, k := range sortedKeys(fields) {
		if err := decodeField(&a, k, fields[k]); err != nil {
			return Request{}, invalid("action %s: %q %v", a.Kind, k, err)
		}
	}
	return Request{ProtocolVersion: v, Action: a}, nil
}

func decodeField(a *Action, name string, raw json.RawMessage) error {
	switch name {
	case "kind":
		return nil
	case "resource":
		if err := strictValue(raw, &a.Resource); err != nil {
			return err
		}
		if a.Resource == "" {
			return errors.New("must not be empty")
		}
	case "enabled":
		return strictValue(raw, &a.Enabled)
	case "id":
		return strictValue(raw, &a.ID)
	case "upstream_stopped":
		return strictValue(raw, &a.UpstreamStopped)
	case "minutes":
		return strictValue(raw, &a.Minutes)
	case "inhibited":
		return strictValue(raw, &a.Inhibited)
	case "idle_seconds":
		if err := strictValue(raw, &a.IdleSeconds); err != nil {
			return err
		}
		if *a.IdleSeconds < 0 {
			return errors.New("must not be negative")
		}
	case "source":
		if err := strictValue(raw, &a.Source); err != nil {
			return err
		}
		return checkSource(a.Source)
	case "settings":
		doc, err := decodeSettings(raw)
		if err != nil {
			return err
		}
		a.Settings = doc
	default:
		return errors.New("is not a field of this action")
	}
	return nil
}

// checkSource keeps a reporter's source name short and plain, because it
// reaches logs and /status: 1 to 64 of [A-Za-z0-9._-].
func checkSource(s string) error {
	if s == "" || len(s) > MaxPresenceSource {
		return fmt.Errorf("must be 1 to %d characters", MaxPresenceSource)
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return errors.New("may hold only letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

func decodeSettings(raw json.RawMessage) (*SettingsDocument, error) {
	fields, err := objectFields(raw)
	if err != nil {
		return nil, fmt.Errorf(`must be the settings document {"revision": ..., "settings": {...}}: %v`, err)
	}
	for _, k := range sortedKeys(fields) {
		if k != "revision" && k != "settings" {
			return nil, fmt.Errorf("has unknown field %q (want revision and settings)", k)
		}
	}
	doc := &SettingsDocument{}
	rawRev, ok := fields["revision"]
	if !ok {
		return nil, errors.New(`needs "revision", as read from GET /admin/settings`)
	}
	if err := strictValue(rawRev, &doc.Revision); err != nil || doc.Revision == "" {
		return nil, errors.New(`"revision" must be a non-empty string`)
	}
	rawS, ok := fields["settings"]
	if !ok {
		return nil, errors.New(`needs "settings"`)
	}
	trimmed := bytes.TrimSpace(rawS)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New(`"settings" must be a JSON object`)
	}
	doc.Settings = append(json.RawMessage(nil), trimmed...)
	return doc, nil
}

// objectFields splits a JSON object into its members, refusing anything
// but exactly one object, duplicate names and trailing data. Names are
// compared exactly, unlike encoding/json's case-folding match.
func objectFields(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("not valid JSON")
		}
		name, _ := tok.(string)
		if _, dup := fields[name]; dup {
			return nil, fmt.Errorf("field %q appears twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("not valid JSON")
		}
		fields[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return fields, nil
}

// strictValue decodes one member's value, refusing null.
func strictValue(raw json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("must not be null")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			switch te.Type.Kind() {
			case reflect.Bool:
				return errors.New("must be true or false")
			case reflect.String:
				return errors.New("must be a string")
			case reflect.Int, reflect.Uint64:
				return errors.New("must be a whole number in range")
			}
			return errors.New("must be a number")
		}
		return errors.New("has an invalid value")
	}
	return nil
}
