package gate_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// rawConn is a client connection to a gate that writes requests by hand,
// so that a test can stall mid-body or stop reading.
type rawConn struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

// hangGuard bounds every raw read and write: a gate that never answers
// fails the test rather than hanging it.
const hangGuard = 20 * time.Second

func dialRaw(t testing.TB, e *gateEnv) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", e.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(hangGuard))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// head writes a request line and headers; extra are "Name: value" lines.
func (r *rawConn) head(method, path, token string, extra ...string) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\n", method, path)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	r.write(b.String())
}

func (r *rawConn) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// response reads one complete response.
func (r *rawConn) response() (*http.Response, []byte) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading the gate's answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("reading the gate's answer body: %v", err)
	}
	return resp, b
}

// closed checks that the gate closes the connection: reading ends in EOF
// or a reset, never in the hang guard's deadline.
func (r *rawConn) closed(what string) {
	r.t.Helper()
	_, err := io.Copy(io.Discard, r.br)
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
	case errors.Is(err, os.ErrDeadlineExceeded):
		r.t.Fatalf("%s: the gate kept the connection open", what)
	default:
		r.t.Fatalf("%s: %v", what, err)
	}
}

func limitsWith(f func(*config.Limits)) *config.Limits {
	l := testLimits()
	f(&l)
	return &l
}

// TestSlowBody: a client that sends part of its body and stalls past
// body_timeout gets 408 refused_body_timeout, in the upstream's shape, and
// its connection is closed; the upstream sees nothing and the budget
// returns to zero. Declared and chunked bodies alike.
func TestSlowBody(t *testing.T) {
	fake := fakeupstream.StartOpenAI(t)
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL, limits: limitsWith(func(l *config.Limits) {
		l.BodyTimeout = config.D(200 * time.Millisecond)
	})})
	for i, c := range []struct {
		name    string
		headers []string
		partial string
	}{
		{"declared", []string{"Content-Length: 1000"}, `{"model":"m",`},
		{"chunked", []string{"Transfer-Encoding: chunked"}, "d\r\n{\"model\":\"m\",\r\n"},
	} {
		r := dialRaw(t, e)
		r.head("POST", "/v1/chat/completions", aliceToken, c.headers...)
		r.write(c.partial) // then nothing more
		resp, body := r.response()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
		}
		errorMessage(t, config.KindOpenAI, body, "refused_body_timeout")
		r.closed(c.name + " slow body")
		e.waitCounter(t, gate.OutcomeBodyTimeout, float64(i+1))
	}
	if fake.Count() != 0 {
		t.Fatalf("%d slow requests reached the upstream", fake.Count())
	}
	eventually(t, "the budget back to 0", func() bool { return e.Budget.Used() == 0 })
}

// TestOversizedBody: a body over max_body_bytes is refused with 413
// refused_body_too_large: a declared one before anything is read (even
// before authentication), a chunked one once it passes the cap. The
// connection is closed, nothing reaches the upstream; a body of exactly
// the cap passes.
func TestOversizedBody(t *testing.T) {
	const max = 64 << 10
	fake := fakeupstream.StartOpenAI(t)
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: fake.URL, limits: limitsWith(func(l *config.Limits) {
		l.MaxBodyBytes = max
		l.BodyTimeout = config.D(300 * time.Millisecond)
	})})
	n := 0
	for _, token := range []string{aliceToken, ""} {
		r := dialRaw(t, e)
		// Declared too large: refused on the header, the body never sent.
		r.head("POST", "/v1/chat/completions", token, fmt.Sprintf("Content-Length: %d", max+1))
		resp, body := r.response()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("declared (token %v): %d %s", token != "", resp.StatusCode, body)
		}
		errorMessage(t, config.KindOpenAI, body, "refused_body_too_large")
		r.closed("declared oversized body")
		n++
		e.waitCounter(t, gate.OutcomeBodyTooLarge, float64(n))
	}

	// Chunked: the whole body is sent; the gate stops reading past the cap.
	r := dialRaw(t, e)
	r.head("POST", "/v1/chat/completions", aliceToken, "Transfer-Encoding: chunked")
	go func() {
		chunk := strings.Repeat("a", 8<<10)
		for i := 0; i < 2*max/len(chunk); i++ {
			if _, err := fmt.Fprintf(r.c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(r.c, "0\r\n\r\n")
	}()
	resp, body := r.response()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d %s", resp.StatusCode, body)
	}
	errorMessage(t, config.KindOpenAI, body, "refused_body_too_large")
	r.closed("chunked oversized body")
	e.waitCounter(t, gate.OutcomeBodyTooLarge, float64(n+1))
	if fake.Count() != 0 {
		t.Fatalf("%d oversized requests reached the upstream", fake.Count())
	}

	// Exactly the cap passes, declared and chunked.
	exact := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", max-60) + `"}]}`
	exact += strings.Repeat(" ", max-len(exact))
	for _, chunked := range []bool{false, true} {
		hr, _ := http.NewRequest("POST", e.URL+"/v1/chat/completions", io.NopCloser(strings.NewReader(exact)))
		if !chunked {
			hr.Body, hr.ContentLength = io.NopCloser(strings.NewReader(exact)), int64(len(exact))
		}
		hr.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := e.client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a body of exactly max_body_bytes (chunked %v): %d", chunked, resp.StatusCode)
		}
	}
	eventually(t, "the budget back to 0", func() bool { return e.Budget.Used() == 0 })
}

// TestRefusedBodyConnectionNotHeld: a client refused before its body is
// read (no token) that never sends the body gets its answer at once and
// its connection closed within body_timeout, rather than the connection
// staying open while the server waits for the unread body.
func TestRefusedBodyConnectionNotHeld(t *testing.T) {
	fake := fakeupstream.StartOllama(t)
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, limits: limitsWith(func(l *config.Limits) {
		l.BodyTimeout = config.D(300 * time.Millisecond)
	})})
	for _, extra := range [][]string{{"Content-Length: 100"}, {"Transfer-Encoding: chunked"}} {
		r := dialRaw(t, e)
		r.head("POST", "/api/chat", "", extra...)
		resp, body := r.response()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%v: %d %s", extra, resp.StatusCode, body)
		}
		errorMessage(t, config.KindOllama, body, "")
		r.closed("unauthenticated request with an unsent body")
	}
	if fake.Count() != 0 {
		t.Fatal("an unauthenticated request reached the upstream")
	}
}

// TestResponseNeverRead: a client that stops reading a long stream has its
// connection cut once the gate's writes stall for response_idle_timeout;
// the upstream request is cancelled (the fake sees the cancel), the
// request is counted (client_gone) and the in-flight gauge returns to 0.
func TestResponseNeverRead(t *testing.T) {
	fake := fakeupstream.StartOllama(t, fakeupstream.WithTokens(1<<22))
	e := startGate(t, gateConfig{kind: config.KindOllama, target: fake.URL, limits: limitsWith(func(l *config.Limits) {
		l.ResponseIdleTimeout = config.D(300 * time.Millisecond)
	})})
	r := dialRaw(t, e)
	body := `{"model":"llama3.2","prompt":"write forever"}`
	r.head("POST", "/api/generate", aliceToken, fmt.Sprintf("Content-Length: %d", len(body)))
	r.write(body)
	// Read nothing. The gate must give up on its own.
	if err := fake.WaitCancelled(waitCtx(t), 1); err != nil {
		t.Fatalf("the upstream never saw the cancel: %v", err)
	}
	cancelled := fake.Requests()[0]
	if !cancelled.Cancelled || cancelled.Path != "/api/generate" {
		t.Fatalf("recorded %+v", cancelled)
	}
	r.closed("unread stream")
	e.waitCounter(t, gate.OutcomeClientGone, 1)
	eventually(t, "in-flight gauge back to 0", func() bool { return e.inFlight(t) == 0 })
	eventually(t, "the budget back to 0", func() bool { return e.Budget.Used() == 0 })
}
