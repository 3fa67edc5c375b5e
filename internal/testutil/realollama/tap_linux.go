//go:build linux

package realollama

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Tap is a transparent TCP relay in front of a server: a gate pointed at
// the tap reaches the server exactly as it would directly (bytes are copied
// unchanged and a hang-up on either side closes both), and the tap records
// every connection's bytes both ways and which side hung up first. Ollama
// does not log request headers, so the tap is how a test sees what a gate
// sent upstream.
type Tap struct {
	// Addr is the tap's host:port and URL its base URL.
	Addr, URL string
	target    string
	ln        net.Listener

	mu    sync.Mutex
	conns []*tapConn
	wg    sync.WaitGroup
}

type tapConn struct {
	mu         sync.Mutex
	sent       bytes.Buffer // client to server
	received   bytes.Buffer // server to client
	closedBy   string       // "client" or "server": who hung up first
	client, up net.Conn
}

// NewTap starts a tap that relays to target (host:port); it is closed at
// test cleanup.
func NewTap(t testing.TB, target string) *Tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &Tap{Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(), target: target, ln: ln}
	tp.wg.Add(1)
	go tp.accept()
	t.Cleanup(tp.Close)
	return tp
}

// Tap starts a tap in front of the server.
func (s *Server) Tap(t testing.TB) *Tap { return NewTap(t, s.Addr) }

// Close stops accepting, closes every relayed connection and waits for the
// relays to end.
func (tp *Tap) Close() {
	tp.ln.Close()
	tp.mu.Lock()
	for _, c := range tp.conns {
		c.client.Close()
		if c.up != nil {
			c.up.Close()
		}
	}
	tp.mu.Unlock()
	tp.wg.Wait()
}

func (tp *Tap) accept() {
	defer tp.wg.Done()
	for {
		cc, err := tp.ln.Accept()
		if err != nil {
			return
		}
		c := &tapConn{client: cc}
		tp.mu.Lock()
		tp.conns = append(tp.conns, c)
		tp.mu.Unlock()
		tp.wg.Add(1)
		go tp.relay(c)
	}
}

func (tp *Tap) relay(c *tapConn) {
	defer tp.wg.Done()
	up, err := net.Dial("tcp", tp.target)
	if err != nil {
		c.client.Close()
		return
	}
	c.mu.Lock()
	c.up = up
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn, rec *bytes.Buffer, side string) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				c.mu.Lock()
				rec.Write(buf[:n])
				c.mu.Unlock()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				c.mu.Lock()
				if c.closedBy == "" {
					c.closedBy = side
				}
				c.mu.Unlock()
				// A hang-up on one side is a hang-up on both, as it would
				// be without the tap.
				src.Close()
				dst.Close()
				return
			}
		}
	}
	go pipe(up, c.client, &c.sent, "client")
	go pipe(c.client, up, &c.received, "server")
	wg.Wait()
}

// Sent returns every byte any client sent through the tap.
func (tp *Tap) Sent() []byte {
	var out []byte
	for _, c := range tp.snapshot() {
		out = append(out, c.Sent...)
	}
	return out
}

// Conn is one relayed connection as recorded so far.
type Conn struct {
	Sent, Received []byte
	// ClosedBy is "client" when the client (the gate) hung up first,
	// "server" when the server did, and "" while the connection is open.
	ClosedBy string
}

// Conns returns a snapshot of every connection so far, oldest first.
func (tp *Tap) Conns() []Conn { return tp.snapshot() }

func (tp *Tap) snapshot() []Conn {
	tp.mu.Lock()
	conns := append([]*tapConn(nil), tp.conns...)
	tp.mu.Unlock()
	out := make([]Conn, 0, len(conns))
	for _, c := range conns {
		c.mu.Lock()
		out = append(out, Conn{Sent: bytes.Clone(c.sent.Bytes()), Received: bytes.Clone(c.received.Bytes()), ClosedBy: c.closedBy})
		c.mu.Unlock()
	}
	return out
}

// Exchange is one HTTP request through the tap and as much of its answer as
// came back.
type Exchange struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Status is the answer's status (0 if none came back).
	Status int
	// Answer is the answer's body as far as it came (chunked encoding
	// removed); Complete is whether it ended properly.
	Answer   []byte
	Complete bool
	// ClosedBy is the connection's (see Conn).
	ClosedBy string
}

// Exchanges parses every request sent through the tap so far, with its
// answer, in order per connection and connection by connection.
func (tp *Tap) Exchanges() []Exchange {
	var out []Exchange
	for _, c := range tp.snapshot() {
		reqs := bufio.NewReader(bytes.NewReader(c.Sent))
		resps := bufio.NewReader(bytes.NewReader(c.Received))
		for {
			req, err := http.ReadRequest(reqs)
			if err != nil {
				break
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				break // a request cut short is not an exchange
			}
			ex := Exchange{Method: req.Method, Path: req.URL.Path, Header: req.Header, Body: body, ClosedBy: c.ClosedBy}
			if resp, err := http.ReadResponse(resps, req); err == nil {
				ex.Status = resp.StatusCode
				// A cut answer reads as io.ErrUnexpectedEOF.
				ex.Answer, err = io.ReadAll(resp.Body)
				ex.Complete = err == nil
			}
			out = append(out, ex)
		}
	}
	return out
}
