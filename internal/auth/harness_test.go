package auth

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/vacancyd/vacancyd/internal/testutil/syncbuf"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/httperr"
)

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer = syncbuf.Buffer

// Test tokens. The values are only ever sent in requests; tests assert that no
// log line and no answer contains them.
const (
	readerValue   = "reader-token-0123456789abcdefghijklmnop"
	borrowerValue = "borrower-token-0123456789abcdefghijklmn"
	operatorValue = "operator-token-0123456789abcdefghijklmn"
	adminOnlyVal  = "adminonly-token-0123456789abcdefghijklm"
	unknownValue  = "unknown-token-0123456789abcdefghijklmnop"
)

var allTestSecrets = []string{readerValue, borrowerValue, operatorValue, adminOnlyVal, unknownValue}

func tok(name, value string, scopes ...string) config.Token {
	return config.Token{Name: name, Scopes: scopes, Value: config.NewSecret(value), Secret: config.NewSecret(value)}
}

// withTokens is the usual configuration: loopback trusted, four tokens.
func withTokens() config.Auth {
	return config.Auth{TrustLoopback: true, Tokens: []config.Token{
		tok("reader", readerValue, "read"),
		tok("borrower", borrowerValue, "borrow"),
		tok("operator", operatorValue, "read", "admin"),
		tok("adminonly", adminOnlyVal, "admin"),
	}}
}

// noTokens is the embedded default's posture: loopback trusted, no token.
func noTokens() config.Auth { return config.Auth{TrustLoopback: true} }

// newTestAuth builds an Authenticator on a fresh registry with a captured log.
func newTestAuth(t testing.TB, cfg config.Auth, goos string) (*Authenticator, *syncBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	a, err := New(cfg, Options{
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: reg,
		GOOS:       goos,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, logs, reg
}

// caller is where a test request comes from.
type caller int

const (
	// fromV4 is a real TCP connection to a listener on 127.0.0.1.
	fromV4 caller = iota
	// fromV6 is a real TCP connection to a listener on [::1].
	fromV6
	// fromMapped is a constructed request whose peer is ::ffff:127.0.0.1, the
	// IPv4-mapped form a dual-stack listener reports.
	fromMapped
	// fromRemote is a peer outside loopback: a real connection between this
	// machine's own non-loopback addresses where it has one, else a
	// constructed request from 10.1.2.3.
	fromRemote
)

func (c caller) String() string {
	return [...]string{"v4", "v6", "mapped", "remote"}[c]
}

// request is what a matrix row sends.
type request struct {
	method string
	// host is the Host header; "" lets the client use the listener address.
	// {port} is the listener's port, {other} another port.
	host string
	// raw sends the request over a plain TCP connection: "absent" as HTTP/1.0
	// with no Host header, "empty" as HTTP/1.1 with "Host:" and no value.
	raw    string
	header [][2]string
}

// answer is what came back.
type answer struct {
	status    int
	header    http.Header
	body      []byte
	principal string // the handler's echo of the Principal, on success
}

func (ans answer) errBody(t testing.TB) httperr.Body {
	t.Helper()
	var b httperr.Body
	if err := json.Unmarshal(ans.body, &b); err != nil {
		t.Fatalf("answer %d body %q is not the JSON error shape: %v", ans.status, ans.body, err)
	}
	return b
}

// echoPrincipal answers 200 with the principal Require stored.
var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		http.Error(w, "no principal in context", http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, p.String())
})

var (
	remoteOnce sync.Once
	remoteIP   netip.Addr // a non-loopback address of this machine, if any
)

// remoteAddr returns the address remote calls come from.
func remoteAddr() netip.Addr {
	remoteOnce.Do(func() {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return
		}
		for _, a := range addrs {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := pfx.Addr()
			if !ip.Is4() || !ip.IsGlobalUnicast() || ip.IsLoopback() {
				continue
			}
			ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
			if err != nil {
				continue
			}
			_ = ln.Close()
			remoteIP = ip
			return
		}
	})
	if remoteIP.IsValid() {
		return remoteIP
	}
	return netip.MustParseAddr("10.1.2.3")
}

var (
	v6Once sync.Once
	v6OK   bool
)

func haveIPv6Loopback() bool {
	v6Once.Do(func() {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err == nil {
			v6OK = true
			_ = ln.Close()
		}
	})
	return v6OK
}

// send makes rq reach h from c and returns the answer.
func send(t testing.TB, h http.Handler, c caller, rq request) answer {
	t.Helper()
	switch c {
	case fromV4:
		return sendReal(t, h, "127.0.0.1", netip.Addr{}, rq)
	case fromV6:
		if !haveIPv6Loopback() {
			t.Skip("::1 is not available here")
		}
		return sendReal(t, h, "::1", netip.Addr{}, rq)
	case fromMapped:
		return sendConstructed(t, h, "[::ffff:127.0.0.1]:40001", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9811}, rq)
	default:
		if ip := remoteAddr(); remoteIP.IsValid() {
			return sendReal(t, h, ip.String(), ip, rq)
		}
		return sendConstructed(t, h, "10.1.2.3:40001", &net.TCPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 9811}, rq)
	}
}

func expand(s string, port int) string {
	s = strings.ReplaceAll(s, "{port}", strconv.Itoa(port))
	return strings.ReplaceAll(s, "{other}", strconv.Itoa(port+1))
}

// sendReal serves h on a real listener on listenIP and calls it over TCP,
// from local when valid.
func sendReal(t testing.TB, h http.Handler, listenIP string, local netip.Addr, rq request) answer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", listenIP, err)
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if local.IsValid() {
		dialer.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	method := rq.method
	if method == "" {
		method = http.MethodGet
	}
	if rq.raw != "" {
		return sendRaw(t, dialer, ln.Addr().String(), method, rq)
	}
	req, err := http.NewRequest(method, "http://"+ln.Addr().String()+"/route", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rq.host != "" {
		req.Host = expand(rq.host, port)
	}
	for _, kv := range rq.header {
		req.Header.Add(kv[0], expand(kv[1], port))
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	return readAnswer(t, resp)
}

// sendRaw writes the request bytes itself, for Host headers net/http's
// client cannot send (absent or empty).
func sendRaw(t testing.TB, dialer *net.Dialer, addr, method string, rq request) answer {
	t.Helper()
	conn, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	switch rq.raw {
	case "absent":
		fmt.Fprintf(&b, "%s /route HTTP/1.0\r\n", method)
	case "empty":
		fmt.Fprintf(&b, "%s /route HTTP/1.1\r\nHost:\r\nConnection: close\r\n", method)
	default:
		t.Fatalf("unknown raw mode %q", rq.raw)
	}
	port := conn.RemoteAddr().(*net.TCPAddr).Port
	for _, kv := range rq.header {
		fmt.Fprintf(&b, "%s: %s\r\n", kv[0], expand(kv[1], port))
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading raw answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	return readAnswer(t, resp)
}

// sendConstructed hands h a request as net/http's server would build it for
// the peer remote arriving on local.
func sendConstructed(t testing.TB, h http.Handler, remote string, local *net.TCPAddr, rq request) answer {
	t.Helper()
	method := rq.method
	if method == "" {
		method = http.MethodGet
	}
	req := httptest.NewRequest(method, "/route", nil)
	req.RemoteAddr = remote
	req.Host = local.String()
	if rq.host != "" {
		req.Host = expand(rq.host, local.Port)
	}
	if rq.raw != "" {
		req.Host = ""
	}
	for _, kv := range rq.header {
		req.Header.Add(kv[0], expand(kv[1], local.Port))
	}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	defer func() { _ = resp.Body.Close() }()
	return readAnswer(t, resp)
}

func readAnswer(t testing.TB, resp *http.Response) answer {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ans := answer{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.StatusCode == http.StatusOK {
		ans.principal = string(body)
	}
	return ans
}

// decisions returns every (scope, outcome) count of the counter.
func decisions(t testing.TB, a *Authenticator) map[[2]string]float64 {
	t.Helper()
	out := map[[2]string]float64{}
	for _, s := range allScopes {
		for _, o := range Outcomes {
			out[[2]string{s.String(), string(o)}] = testutil.ToFloat64(a.counter.WithLabelValues(s.String(), string(o)))
		}
	}
	return out
}

// bearer and apiKey build credential headers.
func bearer(v string) [2]string { return [2]string{"Authorization", "Bearer " + v} }
func apiKey(v string) [2]string { return [2]string{"X-Api-Key", v} }

var intent = [2]string{"X-Vacancyd-Admin", "1"}
