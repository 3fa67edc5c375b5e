package adminsock

// The Windows admin pipe, \\.\pipe\vacancyd-admin: the same one request per
// connection as the Linux socket, with the caller named by the Windows token
// of the account that wrote the request rather than by SO_PEERCRED.
//
// The service side is ListenPipe and PipeListener.Serve, or Server.RunPipe,
// which keeps the pipe up the way Server.Run keeps the socket up. The client
// side is DialPipe (or DialChannel, which picks the pipe on Windows and the
// socket elsewhere), which refuses a pipe not served by the running vacancyd
// service before sending anything. The serving loop, the exchange and every
// decision live in files without a build tag and are tested on Linux; only
// the kernel calls are in pipe_windows.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
)

// ErrPipeInUse is returned by ListenPipe when the pipe's name already
// exists: another instance of the service, or a process squatting the name.
// The service fails closed rather than add instances to a pipe it did not
// create.
var ErrPipeInUse = errors.New("another process already holds the admin pipe's name")

// pipeAcceptRetries is how many accept failures in a row Serve rides out
// (with backoff) before it returns, so that Server.RunPipe recreates the
// pipe.
const pipeAcceptRetries = 10

// identifyFunc reads the token of the account that wrote the request on c.
// It is called after the request has been read: Windows lets a pipe server
// read the client's token only once the client has written.
type identifyFunc func(c net.Conn) (tokenFacts, error)

// PipeListener is the listening admin pipe. Close it to remove the pipe.
type PipeListener struct {
	opts      Options
	ln        net.Listener
	identify  identifyFunc
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// ListenPipe creates the admin pipe, PipeName, with the security descriptor
// pipeSDDL describes, rejecting remote clients. It fails with ErrPipeInUse
// when the name exists already. Options' Path, AdminGroup, Groups and
// LookupTimeout do not apply to the pipe. Where there is no pipe (anywhere
// but Windows) it returns ErrNotSupported.
func ListenPipe(opts Options) (*PipeListener, error) {
	return listenPipe(opts.withDefaults())
}

func newPipeListener(opts Options, ln net.Listener, identify identifyFunc) *PipeListener {
	return &PipeListener{opts: opts, ln: ln, identify: identify}
}

// Name is the pipe's name.
func (l *PipeListener) Name() string { return PipeName }

// Close stops listening and removes the pipe. Connections being served
// finish on their own.
func (l *PipeListener) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		err := l.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		l.closeErr = err
	})
	return l.closeErr
}

// Serve answers connections until ctx ends or the listener is closed, then
// waits for the connections in flight; it returns nil in those cases. Each
// connection carries one request, read until the client's zero-length
// message that marks its end, and gets one answer. Serve closes the
// listener when ctx ends, since a pipe cannot be told to stop accepting
// otherwise.
func (l *PipeListener) Serve(ctx context.Context, h Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, l.opts.MaxConns)
	var delay time.Duration
	failures := 0
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := l.ln.Accept()
		if err != nil {
			<-sem
			if ctx.Err() != nil || l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			failures++
			if failures > pipeAcceptRetries {
				return fmt.Errorf("adminsock: accept on %s: %w", PipeName, err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.opts.Log.Warn("accept failed; retrying", "err", err, "in", delay)
			select {
			case <-time.After(delay):
				continue
			case <-ctx.Done():
				return nil
			}
		}
		delay, failures = 0, 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l.serveConn(ctx, c, h)
		}()
	}
}

// serveConn reads the one request, identifies who wrote it, answers and
// closes. A caller that cannot be identified gets no answer, as on the
// socket.
func (l *PipeListener) serveConn(ctx context.Context, c net.Conn, h Handler) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_ = c.SetReadDeadline(time.Now().Add(l.opts.ReadTimeout))
	req, err := io.ReadAll(io.LimitReader(c, admin.MaxRequestBytes+1))
	if err != nil {
		l.opts.Log.Debug("request not read; closing", "err", err)
		return
	}
	if len(req) == 0 {
		// A client that checked who serves the pipe and chose not to
		// send anything.
		l.opts.Log.Debug("client sent nothing")
		return
	}
	facts, err := l.identify(c)
	if err != nil {
		l.opts.Log.Warn("cannot read the caller's token; closing", "err", err)
		return
	}
	caller, why := decideWindowsCaller(facts)
	if caller.Account == "" {
		l.opts.Log.Warn("the caller's token names no account; closing", "pid", facts.pid)
		return
	}
	l.opts.Log.Debug("admin request", "sid", caller.Account, "pid", facts.pid, "administrator", caller.Administrator, "why", why)
	resp := h.Handle(ctx, caller, req)
	_ = c.SetWriteDeadline(time.Now().Add(l.opts.ReadTimeout))
	if _, err := c.Write(resp.JSON()); err != nil {
		l.opts.Log.Debug("answer not delivered", "sid", caller.Account, "err", err)
	}
}

// pipeServing is what RunPipe needs of a listener; tests substitute it.
type pipeServing = serving

// RunPipe is Run for the Windows admin pipe: it creates the pipe, serves it
// until ctx ends, and when the pipe cannot be created (its name is taken,
// say) or serving fails, logs why and tries again with capped exponential
// backoff, reporting the channel's state (with PipeName as its path)
// meanwhile. It returns nil when ctx ends. Where there is no pipe it reports
// unavailable and returns ErrNotSupported at once.
func (s *Server) RunPipe(ctx context.Context) error {
	return s.runPipe(ctx, func(o Options) (pipeServing, error) {
		l, err := listenPipe(o)
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}

func (s *Server) runPipe(ctx context.Context, listen func(Options) (pipeServing, error)) error {
	return s.serveLoop(ctx, "admin pipe", PipeName, func(o Options) (serving, error) { return listen(o) })
}

// setPipe is set with the pipe's name as the channel's path.

// PipeConn is a connection to an admin pipe DialPipe checked.
type PipeConn struct {
	conn net.Conn
	// ServerPID is the process serving the pipe: the vacancyd service's.
	ServerPID uint32
}

// Close closes the connection.
func (c *PipeConn) Close() error { return c.conn.Close() }

// Exchange sends the connection's one request, marks its end with a
// zero-length message, and reads the answer up to MaxAnswerBytes.
func (c *PipeConn) Exchange(ctx context.Context, request []byte) ([]byte, error) {
	return exchange(ctx, c.conn, request)
}

// halfCloser is a connection that can mark the end of what it sends: a
// Unix socket's shutdown, or a message pipe's zero-length message.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// exchange is Conn.Exchange for any connection that can half-close.
func exchange(ctx context.Context, nc net.Conn, request []byte) ([]byte, error) {
	c, ok := nc.(halfCloser)
	if !ok {
		return nil, errors.New("adminsock: the connection cannot mark the end of a request")
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(request); err != nil {
		return nil, fmt.Errorf("adminsock: send the request: %w", err)
	}
	if err := c.CloseWrite(); err != nil {
		return nil, fmt.Errorf("adminsock: send the request: %w", err)
	}
	answer, err := io.ReadAll(io.LimitReader(c, MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("adminsock: read the answer: %w", err)
	}
	if len(answer) == 0 {
		return nil, errors.New("adminsock: the service closed the connection without answering")
	}
	if len(answer) > MaxAnswerBytes {
		return nil, fmt.Errorf("adminsock: the answer is larger than %d bytes", MaxAnswerBytes)
	}
	return answer, nil
}

// Channel is one connection to the local admin channel, checked before
// anything was sent: a *Conn to the Linux socket or a *PipeConn to the
// Windows pipe.
type Channel interface {
	Exchange(ctx context.Context, request []byte) ([]byte, error)
	Close() error
}

// DialChannel connects to this platform's local admin channel: the admin
// pipe on Windows (socketPath is then unused), the socket at socketPath
// elsewhere. Its refusal of an untrusted server satisfies IsUntrusted; a
// missing service wraps ErrNoService.
func DialChannel(ctx context.Context, socketPath string) (Channel, error) {
	return dialChannel(ctx, socketPath)
}

// IsUntrusted reports whether err is a client's refusal of the server it
// reached (*UntrustedError or *PipeUntrustedError): nothing was sent.
func IsUntrusted(err error) bool {
	var ut *UntrustedError
	var pt *PipeUntrustedError
	return errors.As(err, &ut) || errors.As(err, &pt)
}
