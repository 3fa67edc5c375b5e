package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
)

// member is one key of a top-level JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

var errNotObject = errors.New("request body is not a JSON object")

// members reads the first JSON value of body, which must be an object, and
// returns its keys in order with their raw values. Like Ollama (gin's
// ShouldBindJSON decodes one value from a stream), anything after the first
// value is ignored.
func members(body []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("missing request body")
	}
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected object key %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, value: raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

// field returns, in order, the values of every key that encoding/json would
// decode into a struct field named name: keys match case-insensitively
// (Unicode simple folding, as strings.EqualFold) and, for duplicates, the
// last one is what the struct ends up with.
func field(ms []member, name string) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range ms {
		if strings.EqualFold(m.key, name) {
			out = append(out, m.value)
		}
	}
	return out
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// effectiveString is the value encoding/json leaves in a string field
// after decoding every value in vs in order: null leaves the field as it
// was; a string sets it; any other type is a decode error (Ollama answers
// 400 and does nothing).
func effectiveString(vs []json.RawMessage) (string, error) {
	var s string
	for _, v := range vs {
		if isNull(v) {
			continue
		}
		if err := json.Unmarshal(v, &s); err != nil {
			return "", err
		}
	}
	return s, nil
}

// stringValues returns every string value among vs, ignoring other types.
func stringValues(vs []json.RawMessage) []string {
	var out []string
	for _, v := range vs {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// effectiveKeepAlive is what a *Duration field holds after decoding vs in
// order: null resets it to unset, anything else is parsed. ok is false when
// the field ends up unset.
func effectiveKeepAlive(vs []json.RawMessage) (k keepAlive, ok bool, err error) {
	for _, v := range vs {
		if isNull(v) {
			k, ok = keepAlive{}, false
			continue
		}
		k, err = parseKeepAlive(v)
		if err != nil {
			return keepAlive{}, false, err
		}
		ok = true
	}
	return k, ok, nil
}

// effectiveLen is the length of a slice field after decoding vs in order:
// null empties it, an array replaces it, anything else is a decode error.
func effectiveLen(vs []json.RawMessage) (int, error) {
	n := 0
	for _, v := range vs {
		if isNull(v) {
			n = 0
			continue
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(v, &arr); err != nil {
			return 0, err
		}
		n = len(arr)
	}
	return n, nil
}

// hasInput reports whether an "input" field (Ollama's EmbedRequest.Input,
// type any) carries any text: a non-empty string, or an array holding at
// least one. Anything else counts as no input, which errs towards treating
// a keep_alive 0 request as the unload it would be.
func hasInput(vs []json.RawMessage) bool {
	if len(vs) == 0 {
		return false
	}
	last := vs[len(vs)-1]
	var s string
	if json.Unmarshal(last, &s) == nil {
		return s != ""
	}
	var arr []json.RawMessage
	if json.Unmarshal(last, &arr) != nil {
		return false
	}
	for _, e := range arr {
		if json.Unmarshal(e, &s) == nil && s != "" {
			return true
		}
	}
	return false
}

// webSearchTool reports whether any "tools" array holds a tool whose type
// starts with "web_search": Ollama serves those (Anthropic and Responses
// web search) through the owner's ollama.com account.
func webSearchTool(ms []member) bool {
	for _, v := range field(ms, "tools") {
		var tools []json.RawMessage
		if json.Unmarshal(v, &tools) != nil {
			continue
		}
		for _, t := range tools {
			tm, err := members(t)
			if err != nil {
				continue
			}
			for _, typ := range stringValues(field(tm, "type")) {
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(typ)), "web_search") {
					return true
				}
			}
		}
	}
	return false
}

// rebuild renders the object with every keep_alive key removed and one
// keep_alive set to value appended last (the last key is the one Ollama
// reads). Other keys keep their order and their exact value bytes.
func rebuild(ms []member, value json.RawMessage) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	first := true
	put := func(key string, v json.RawMessage) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		_ = enc.Encode(key) // a Go string always encodes
		buf.Truncate(buf.Len() - 1)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, m := range ms {
		if strings.EqualFold(m.key, "keep_alive") {
			continue
		}
		put(m.key, m.value)
	}
	put("keep_alive", value)
	buf.WriteByte('}')
	return buf.Bytes()
}

// formModels returns every "model" value of a form body (multipart or
// URL-encoded) and of the query: Ollama's transcription middleware reads
// the model with FormValue, which looks at both.
func formModels(contentType string, body []byte, rawQuery string) (models []string, isForm bool, err error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, false, fmt.Errorf("query: %w", err)
	}
	models = append(models, valuesFold(q, "model")...)
	if contentType == "" {
		return models, false, nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false, fmt.Errorf("content type: %w", err)
	}
	switch mt {
	case "multipart/form-data":
		boundary := params["boundary"]
		if boundary == "" {
			return nil, true, errors.New("multipart body without boundary")
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, true, fmt.Errorf("multipart: %w", err)
			}
			if strings.EqualFold(p.FormName(), "model") {
				v, err := io.ReadAll(p)
				if err != nil {
					return nil, true, fmt.Errorf("multipart: %w", err)
				}
				models = append(models, string(v))
			}
		}
		return models, true, nil
	case "application/x-www-form-urlencoded":
		f, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, true, fmt.Errorf("form: %w", err)
		}
		return append(models, valuesFold(f, "model")...), true, nil
	}
	return models, false, nil
}

func valuesFold(v url.Values, key string) []string {
	var out []string
	for k, vs := range v {
		if strings.EqualFold(k, key) {
			out = append(out, vs...)
		}
	}
	return out
}
