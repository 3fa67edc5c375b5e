//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// patience only keeps a broken test from hanging; nothing asserts a duration.
const patience = 30 * time.Second

// client is a Go HTTP client that never uses a proxy from the environment, so
// that its requests reach vacancyd directly.
var client = &http.Client{
	Timeout:   patience,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// newToken returns a fresh token as `vacancyd gen-token` makes them: 256
// random bits, URL-safe base64 without padding.
func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// fingerprint is what vacancyd logs for a presented credential: the first 8
// hex digits of its SHA-256.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

// hostPort joins host and a free port on it.
func hostPort(t *testing.T, host string) string {
	t.Helper()
	return net.JoinHostPort(host, strconv.Itoa(proc.FreePort(t, host)))
}

// reply is one HTTP answer as a client saw it.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// errorBody is vacancyd's JSON error answer.
type errorBody struct {
	Error struct {
		Type          string `json:"type"`
		Message       string `json:"message"`
		RequiredScope string `json:"required_scope"`
	} `json:"error"`
}

// errorBody decodes the answer as vacancyd's JSON error body.
func (r reply) errorBody(t *testing.T) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("status %d: body is not a JSON error: %v: %s", r.Status, err, r.Body)
	}
	return e
}

// curl runs cmd, a curl command line (see curlArgs), and parses the answer it
// prints.
func curl(t *testing.T, cmd *exec.Cmd) reply {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	// curl -i prints the header block as received and the body decoded, so
	// only the header block is parsed as HTTP.
	head, body, ok := bytes.Cut(out, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("%s: no header block in curl's output:\n%s", strings.Join(cmd.Args, " "), out)
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(head, "\r\n\r\n"...))))
	statusLine, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	proto, rest, _ := strings.Cut(statusLine, " ")
	code, err := strconv.Atoi(strings.Fields(rest + " ")[0])
	if !strings.HasPrefix(proto, "HTTP/") || err != nil {
		t.Fatalf("%s: bad status line %q", strings.Join(cmd.Args, " "), statusLine)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("%s: bad header block: %v:\n%s", strings.Join(cmd.Args, " "), err, head)
	}
	return reply{Status: code, Header: http.Header(h), Body: body}
}

// curlArgs is a curl command line for method and url with the given headers
// ("Name: value"): the answer's status line, headers and body go to stdout.
func curlArgs(method, url string, headers ...string) []string {
	args := []string{"-sS", "-i", "--noproxy", "*", "--max-time", strconv.Itoa(int(patience.Seconds())), "-X", method}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	return append(args, url)
}

// do sends a request from this process (the host side) and returns the answer.
func do(t *testing.T, method, url string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(name, strings.TrimSpace(value))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// bearer and apiKey are the two ways to present a token.
func bearer(token string) string { return "Authorization: Bearer " + token }
func apiKey(token string) string { return "X-Api-Key: " + token }

// intent is the admin-intent header.
const intent = "X-Vacancyd-Admin: 1"

// lendingEnabled reads /status from this process and returns
// lending.lending_enabled. Each call is one allowed read decision.
func lendingEnabled(t *testing.T, api string, headers ...string) bool {
	t.Helper()
	r := do(t, http.MethodGet, api+"/status", headers...)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /status for the lending state = %d: %s", r.Status, r.Body)
	}
	return statusLending(t, r.Body)
}

// statusLending decodes a /status document's lending.lending_enabled, failing
// when it is absent.
func statusLending(t *testing.T, body []byte) bool {
	t.Helper()
	var doc struct {
		Lending struct {
			Enabled *bool `json:"lending_enabled"`
		} `json:"lending"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Lending.Enabled == nil {
		t.Fatalf("not a /status document with lending.lending_enabled (%v): %s", err, body)
	}
	return *doc.Lending.Enabled
}

// adminAnswer decodes an admin action's answer.
func adminAnswer(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("admin answer is not JSON: %v: %s", err, r.Body)
	}
	return m
}

// counts are vacancyd_auth_total's series, keyed "scope/outcome".
type counts map[string]float64

var (
	authLine  = regexp.MustCompile(`^vacancyd_auth_total\{([^}]*)\} (\S+)$`)
	labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// authCounts reads vacancyd_auth_total from /metrics, sent from this process
// with the given headers. The read itself counts as one allowed read decision,
// included in what it returns.
func authCounts(t *testing.T, api string, headers ...string) counts {
	t.Helper()
	r := do(t, http.MethodGet, api+"/metrics", headers...)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", r.Status, r.Body)
	}
	return parseAuthCounts(t, r.Body)
}

func parseAuthCounts(t *testing.T, exposition []byte) counts {
	t.Helper()
	c := counts{}
	for line := range strings.Lines(string(exposition)) {
		m := authLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[p[1]] = p[2]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("bad sample %q: %v", line, err)
		}
		c[labels["scope"]+"/"+labels["outcome"]] = v
	}
	if len(c) == 0 {
		t.Fatalf("no vacancyd_auth_total series in /metrics:\n%s", exposition)
	}
	return c
}

// delta returns after minus before, only the series that moved.
func delta(before, after counts) counts {
	d := counts{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			d[k] = -v
		}
	}
	return d
}

// assertDelta fails unless exactly the series in want moved, by exactly
// those amounts.
func assertDelta(t *testing.T, before, after, want counts) {
	t.Helper()
	got := delta(before, after)
	if !maps.Equal(got, want) {
		t.Errorf("vacancyd_auth_total moved by\n  %s\nwant\n  %s", fmtCounts(got), fmtCounts(want))
	}
}

func fmtCounts(c counts) string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, c[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// logLine is one line of the daemon's JSON log.
type logLine map[string]any

func (l logLine) str(key string) string {
	s, _ := l[key].(string)
	return s
}

// peerHost is the address part of the line's peer.
func (l logLine) peerHost() string {
	host, _, err := net.SplitHostPort(l.str("peer"))
	if err != nil {
		return l.str("peer")
	}
	return host
}

// logLines parses the daemon's JSON log, skipping anything that is not a
// JSON object.
func logLines(d *proc.Daemon) []logLine {
	var out []logLine
	for line := range strings.Lines(d.Log.String()) {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// findLog returns the log lines with msg whose fields equal every pair in
// want.
func findLog(lines []logLine, msg string, want map[string]string) []logLine {
	var out []logLine
	for _, l := range lines {
		if l.str("msg") != msg {
			continue
		}
		ok := true
		for k, v := range want {
			got := l.str(k)
			if k == "peer_host" {
				got = l.peerHost()
			}
			if got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// assertNoSecrets fails if the daemon's log holds any of the secrets.
func assertNoSecrets(t *testing.T, d *proc.Daemon, secrets ...string) {
	t.Helper()
	log := d.Log.String()
	for i, s := range secrets {
		if strings.Contains(log, s) {
			t.Errorf("the daemon log contains secret #%d of %d", i, len(secrets))
		}
	}
}

// runBinary runs the vacancyd binary with args and returns its exit code and
// combined output.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	out, err := exec.CommandContext(ctx, proc.Binary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("vacancyd %s did not exit: %s", strings.Join(args, " "), out)
	}
	if err == nil {
		return 0, string(out)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("vacancyd %s: %v", strings.Join(args, " "), err)
	}
	return ee.ExitCode(), string(out)
}
