package adapter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vacancyd/vacancyd/internal/config"
)

// DefaultCallTimeout bounds one Reclaimer call whose context has no
// deadline, when Upstream.Timeout is zero.
const DefaultCallTimeout = 10 * time.Second

// maxResponse is the most of an upstream answer a Reclaimer reads. ComfyUI's
// /queue carries every queued workflow, so it is generous.
const maxResponse = 64 << 20

// maxErrorBody is how much of an error answer goes into a StatusError.
const maxErrorBody = 512

// Upstream is what a Reclaimer needs to reach one upstream server: where it
// is and the credential vacancyd presents there. Printing an Upstream (fmt,
// slog) shows the target with its credentials and query hidden and never
// the Authorization value.
type Upstream struct {
	// Target is the upstream's base URL (config Upstream.Target); a path
	// in it prefixes every request.
	Target *url.URL
	// Authorization is the Authorization header value vacancyd presents
	// ("Bearer ...", "Basic ..."); zero for none.
	Authorization config.Secret
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Timeout bounds each call whose context has no deadline; zero means
	// DefaultCallTimeout.
	Timeout time.Duration
}

// NewUpstream builds the Upstream of a validated [[upstream]]: its target
// and the Authorization value of its credential.
func NewUpstream(up config.Upstream, client *http.Client) (Upstream, error) {
	target, err := url.Parse(up.Target)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return Upstream{}, fmt.Errorf("upstream %s: target is not an absolute URL", up.ID)
	}
	u := Upstream{Target: target, Client: client}
	if v := Authorization(up.Credential); v != "" {
		u.Authorization = config.NewSecret(v)
	}
	return u, nil
}

// Authorization is the header value that presents cr ("Bearer token" or
// "Basic base64(user:secret)"), or "" for no credential or an unknown
// scheme. It is the same value the gate presents on forwarded requests.
func Authorization(cr *config.Credential) string {
	if cr == nil {
		return ""
	}
	switch cr.Scheme {
	case "bearer":
		return "Bearer " + cr.Secret.Reveal()
	case "basic":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(cr.Username+":"+cr.Secret.Reveal()))
	}
	return ""
}

// String shows the target with userinfo and query replaced by ***
// (config.RedactURL), as everywhere vacancyd shows a target.
func (u Upstream) String() string {
	if u.Target == nil {
		return "<no target>"
	}
	return config.RedactURL(u.Target.String())
}

// GoString is String, so that %#v hides the credential too.
func (u Upstream) GoString() string { return "adapter.Upstream(" + u.String() + ")" }

// LogValue logs the redacted target.
func (u Upstream) LogValue() slog.Value { return slog.StringValue(u.String()) }

// Bound returns ctx limited by u's call timeout when ctx has no deadline,
// for a Reclaimer method that makes several calls.
func (u Upstream) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	d := u.Timeout
	if d <= 0 {
		d = DefaultCallTimeout
	}
	return context.WithTimeout(ctx, d)
}

// StatusError is an upstream answer outside 2xx.
type StatusError struct {
	// Method and Path are the request's; Target is the redacted upstream.
	Method, Path, Target string
	// Code is the HTTP status.
	Code int
	// Body is the start of the answer, for diagnosis.
	Body string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s %s%s: upstream answered %d", e.Method, e.Target, e.Path, e.Code)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// StatusCode returns the HTTP status of err when it is (or wraps) a
// StatusError, and 0 otherwise.
func StatusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Call sends one request to the upstream: method on path (joined to the
// target's path), in encoded as a JSON body unless nil, carrying the
// credential. A 2xx answer is decoded into out unless out is nil; any other
// answer is a *StatusError. The call is bounded by ctx, or by u's timeout
// when ctx has no deadline.
func (u Upstream) Call(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := u.Bound(ctx)
	defer cancel()
	req, err := u.newRequest(ctx, method, path, in)
	if err != nil {
		return err
	}
	c := u.Client
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s%s: %w", method, u, path, redactURLError(err))
	}
	defer func() { _ = res.Body.Close() }()
	body := io.LimitReader(res.Body, maxResponse)
	if res.StatusCode < 200 || res.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
		return &StatusError{Method: method, Path: path, Target: u.String(), Code: res.StatusCode, Body: printable(b)}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, body)
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("%s %s%s: decoding the answer: %w", method, u, path, err)
	}
	return nil
}

func (u Upstream) newRequest(ctx context.Context, method, path string, in any) (*http.Request, error) {
	if u.Target == nil {
		return nil, errors.New("adapter: upstream has no target")
	}
	t := *u.Target
	t.Path = strings.TrimSuffix(t.Path, "/") + path
	t.RawPath = ""
	t.Fragment, t.RawFragment = "", ""
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s%s: %w", method, u, path, redactURLError(err))
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if v := u.Authorization.Reveal(); v != "" {
		req.Header.Set("Authorization", v)
	}
	return req, nil
}

// redactURLError drops the URL from a *url.Error, whose text would show the
// target's userinfo and query; the caller names the redacted target.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// printable trims b to valid UTF-8 on one line.
func printable(b []byte) string {
	s := strings.TrimSpace(string(b))
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > maxErrorBody {
		n := maxErrorBody
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}
