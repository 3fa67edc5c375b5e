package auth

import (
	"net/http"
	"strings"

	"github.com/vacancyd/vacancyd/internal/config"
)

// Header names a credential may arrive in.
const (
	headerAuthorization = "Authorization"
	headerAPIKey        = "X-Api-Key"
)

// CredentialStatus says what ParseCredential found.
type CredentialStatus uint8

// The results of ParseCredential.
const (
	// CredentialNone: neither Authorization nor X-Api-Key is present.
	CredentialNone CredentialStatus = iota
	// CredentialOK: one well-formed credential of at most MaxCredentialLength bytes.
	CredentialOK
	// CredentialMalformed: a credential header is present but unusable (another
	// scheme, empty, inner whitespace, several values that disagree).
	CredentialMalformed
	// CredentialTooLong: the credential is longer than MaxCredentialLength
	// bytes. It is refused without being hashed.
	CredentialTooLong
)

// String names the status for logs.
func (s CredentialStatus) String() string {
	switch s {
	case CredentialNone:
		return "none"
	case CredentialOK:
		return "ok"
	case CredentialMalformed:
		return "malformed"
	case CredentialTooLong:
		return "too_long"
	}
	return "unknown"
}

// MaxCredentialLength is the longest credential that is ever hashed or compared.
const MaxCredentialLength = config.MaxTokenLength

// ParseCredential returns the credential a request presents: the
// X-Api-Key header when present, else "Authorization: Bearer <token>" (scheme
// in any letter case). When X-Api-Key is present, Authorization is not
// examined: it may carry an upstream's own credential (forward_authorization).
// Several values of the chosen header must all carry the same token. The value
// is returned only with CredentialOK.
func ParseCredential(h http.Header) (string, CredentialStatus) {
	if vs := headerValues(h, headerAPIKey); vs != nil {
		return parseAll(vs, parseAPIKey)
	}
	if vs := headerValues(h, headerAuthorization); vs != nil {
		return parseAll(vs, parseBearer)
	}
	return "", CredentialNone
}

// headerValues returns every value of name in h, in any letter case; nil when
// the header is absent.
func headerValues(h http.Header, name string) []string {
	var out []string
	for key, vs := range h {
		if strings.EqualFold(key, name) {
			if out == nil {
				out = []string{}
			}
			out = append(out, vs...)
		}
	}
	return out
}

// parseAll parses each value of one header; they must agree.
func parseAll(values []string, parse func(string) (string, CredentialStatus)) (string, CredentialStatus) {
	if len(values) == 0 {
		return "", CredentialMalformed
	}
	var found string
	status := CredentialOK
	for i, v := range values {
		tok, st := parse(v)
		switch {
		case st == CredentialTooLong:
			return "", CredentialTooLong
		case st != CredentialOK || (i > 0 && tok != found):
			status = CredentialMalformed
		}
		found = tok
	}
	if status != CredentialOK {
		return "", status
	}
	return found, CredentialOK
}

// parseBearer parses an Authorization value of the form "Bearer <token>".
func parseBearer(v string) (string, CredentialStatus) {
	v = strings.Trim(v, " \t")
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		if len(v) > MaxCredentialLength+len(scheme)+1 {
			return "", CredentialTooLong
		}
		return "", CredentialMalformed
	}
	return parseAPIKey(v[len(scheme):])
}

// parseAPIKey parses a bare token.
func parseAPIKey(v string) (string, CredentialStatus) {
	v = strings.Trim(v, " \t")
	switch {
	case len(v) > MaxCredentialLength:
		return "", CredentialTooLong
	case v == "" || strings.ContainsAny(v, " \t\r\n"):
		return "", CredentialMalformed
	}
	return v, CredentialOK
}

// StripCredentials removes every header that may carry a vacancyd credential
// (Authorization and X-Api-Key, in any letter case), so that a gate never
// forwards a borrower's token upstream.
func StripCredentials(h http.Header) {
	for key := range h {
		if strings.EqualFold(key, headerAuthorization) || strings.EqualFold(key, headerAPIKey) {
			delete(h, key)
		}
	}
}
