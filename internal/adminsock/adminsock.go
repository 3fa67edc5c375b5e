// Package adminsock is the Linux admin socket: a Unix domain socket on which
// any local account may send one admin request per connection, and on which
// the kernel, not the client, says who that account is (SO_PEERCRED,
// SO_PEERGROUPS). The service side is Listen and Serve (or Server, which
// keeps retrying while the socket cannot be created and reports whether the
// channel is available); the client side is Dial and Request, which refuse a
// server they cannot trust before sending anything.
//
// The socket is Linux only; on Windows, Server.Run serves the admin named
// pipe instead (pipe.go), so the daemon wires one channel either way. On
// other systems Listen and Dial return ErrNotSupported.
package adminsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
)

// DefaultPath is where the service listens unless server.admin_socket says
// otherwise.
const DefaultPath = "/run/vacancyd/admin.sock"

// DefaultAdminGroup is the local administrators' group unless
// server.admin_group names another.
const DefaultAdminGroup = "vacancyd-admin"

// Defaults for Options' zero values.
const (
	DefaultLookupTimeout = 5 * time.Second
	DefaultReadTimeout   = 10 * time.Second
	DefaultMaxConns      = 16
	DefaultRetryMin      = time.Second
	DefaultRetryMax      = time.Minute
	// MaxAnswerBytes caps an answer a client accepts.
	MaxAnswerBytes = 1 << 20
)

// ErrNotSupported is returned where this build has no admin socket.
var ErrNotSupported = errors.New("the admin socket is not supported on this platform")

// ErrInUse is returned by Listen when another instance holds the socket's
// lock file.
var ErrInUse = errors.New("another instance holds the admin socket's lock")

// Options configure the service side.
type Options struct {
	// Path is the socket's absolute path (DefaultPath when empty).
	Path string
	// AdminGroup names the group whose members administer; empty means only
	// root does. Callers pass server.admin_group as it is. The group is
	// looked up by name for every request, so it may be created, renamed or
	// deleted while the service runs.
	AdminGroup string
	// Groups is the user and group database; nil means the system's.
	Groups GroupDB
	// LookupTimeout bounds one membership lookup; past it the caller is a
	// standard account.
	LookupTimeout time.Duration
	// ReadTimeout bounds reading one request.
	ReadTimeout time.Duration
	// MaxConns bounds connections served at once.
	MaxConns int
	// RetryMin and RetryMax bound Server's backoff between attempts to
	// create the socket.
	RetryMin, RetryMax time.Duration
	// Log receives the channel's log lines; nil logs nothing.
	Log *slog.Logger
	// OnState, when set, is called by Server at every state change.
	OnState func(State)
}

func (o Options) withDefaults() Options {
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.Groups == nil {
		o.Groups = SystemGroups{}
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = DefaultLookupTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Log = o.Log.With("component", "adminsock")
	return o
}

// Identity is what the kernel reported about a connection's peer when it
// connected.
type Identity struct {
	UID, GID uint32
	PID      int32
	// Groups are the peer's supplementary groups; meaningful only when
	// GroupsKnown, which is false when the kernel would not say (the caller
	// is then a standard account, unless root).
	Groups      []uint32
	GroupsKnown bool
}

// Account is the identity's account as admin.Caller names it: "uid:<n>".
func (id Identity) Account() string { return fmt.Sprintf("uid:%d", id.UID) }

type identityKey struct{}

// IdentityFrom returns the peer identity of the connection a request came
// on; handlers get it in their context.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Handler performs one request for its caller. admin.Handlers is one.
type Handler interface {
	Handle(ctx context.Context, c admin.Caller, request []byte) admin.Response
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c admin.Caller, request []byte) admin.Response

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c admin.Caller, request []byte) admin.Response {
	return f(ctx, c, request)
}

// Listener is a listening admin socket. Close it to remove the socket.
type Listener struct {
	opts      Options
	ln        *net.UnixListener
	sys       *sysListener
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Listen creates the admin socket at opts.Path. It refuses a directory that
// is a symbolic link (or under one), is owned by another account or is
// writable by group or others; creates the directory's last component
// (mode 0755) when missing; replaces an existing socket only when nothing is
// listening on it, and never anything else; and takes a lock file next to
// the socket (<path>.lock) so that two instances cannot race. The socket is
// mode 0666: connecting grants nothing by itself.
func Listen(opts Options) (*Listener, error) {
	opts = opts.withDefaults()
	return listen(opts)
}

// Path is the socket's path.
func (l *Listener) Path() string { return l.opts.Path }

// Close stops listening, removes the socket if it is still the one this
// Listener created, and releases the lock. Connections being served finish
// on their own.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		// The socket is judged ours by device and inode while the listener
		// is still open: an open listener keeps its file's inode alive, so
		// its number cannot have been reused by whatever replaced it.
		rmErr := l.sys.removeOurs(l.opts.Log)
		err := l.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		l.sys.release()
		l.closeErr = errors.Join(rmErr, err)
	})
	return l.closeErr
}

// Serve answers connections until ctx ends or the Listener is closed, then
// waits for the connections in flight. It returns nil in those cases and the
// accept error otherwise. Each connection carries one request, read until
// the client shuts down its writing side, and gets one answer.
func (l *Listener) Serve(ctx context.Context, h Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = l.ln.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, l.opts.MaxConns)
	var delay time.Duration
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := l.ln.AcceptUnix()
		if err != nil {
			<-sem
			if ctx.Err() != nil || l.closed.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) && !ne.Timeout() {
				// Out of file descriptors and the like: wait and go on,
				// as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.opts.Log.Warn("accept failed; retrying", "err", err, "in", delay)
				select {
				case <-time.After(delay):
					continue
				case <-ctx.Done():
					return nil
				}
			}
			return fmt.Errorf("adminsock: accept on %s: %w", l.opts.Path, err)
		}
		delay = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l.serveConn(ctx, c, h)
		}()
	}
}

func (l *Listener) serveConn(ctx context.Context, c *net.UnixConn, h Handler) {
	defer c.Close()
	id, err := peerIdentity(c)
	if err != nil {
		l.opts.Log.Warn("cannot read the peer's credentials; closing", "err", err)
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_ = c.SetReadDeadline(time.Now().Add(l.opts.ReadTimeout))
	req, err := io.ReadAll(io.LimitReader(c, admin.MaxRequestBytes+1))
	if err != nil {
		l.opts.Log.Debug("request not read; closing", "uid", id.UID, "err", err)
		return
	}
	if len(req) == 0 {
		// A client that checked who serves the socket and chose not to
		// send anything.
		l.opts.Log.Debug("client sent nothing", "uid", id.UID, "pid", id.PID)
		return
	}
	caller := admin.Caller{Account: id.Account(), Via: "socket"}
	var why string
	caller.Administrator, why = administrator(ctx, id, l.opts.AdminGroup, l.opts.Groups, l.opts.LookupTimeout)
	l.opts.Log.Debug("admin request", "uid", id.UID, "pid", id.PID, "administrator", caller.Administrator, "why", why)
	resp := h.Handle(context.WithValue(ctx, identityKey{}, id), caller, req)
	_ = c.SetWriteDeadline(time.Now().Add(l.opts.ReadTimeout))
	if _, err := c.Write(resp.JSON()); err != nil {
		l.opts.Log.Debug("answer not delivered", "uid", id.UID, "err", err)
	}
}

// State values of the admin channel.
const (
	StateAvailable   = "available"
	StateUnavailable = "unavailable"
)

// State is whether the admin channel is up, as /status shows it
// (admin_channel).
type State struct {
	State string `json:"state"`
	// Reason says why the channel is unavailable.
	Reason string `json:"reason,omitempty"`
	Path   string `json:"path"`
}

// Server keeps the admin socket up: it listens, serves, and when the socket
// cannot be created (or serving fails) logs why and tries again with capped
// exponential backoff, reporting the channel's state meanwhile.
type Server struct {
	opts Options
	h    Handler

	mu    sync.Mutex
	state State
}

// NewServer returns a Server that is unavailable until Run creates the socket.
func NewServer(opts Options, h Handler) *Server {
	opts = opts.withDefaults()
	return &Server{opts: opts, h: h, state: State{State: StateUnavailable, Reason: "not started", Path: opts.Path}}
}

// State returns the channel's current state.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Server) setState(st State) {
	s.mu.Lock()
	changed := st != s.state
	s.state = st
	s.mu.Unlock()
	if changed && s.opts.OnState != nil {
		s.opts.OnState(st)
	}
}

// Run serves until ctx ends and returns nil then. Where the platform has no
// admin socket it reports unavailable and returns ErrNotSupported at once.
func (s *Server) Run(ctx context.Context) error {
	if runtime.GOOS == "windows" {
		return s.RunPipe(ctx)
	}
	return s.serveLoop(ctx, "admin socket", s.opts.Path, func(o Options) (serving, error) {
		l, err := listen(o) // o has its defaults already
		if err != nil {
			return nil, err
		}
		return l, nil
	})
}

// serving is a listening admin channel: the socket's Listener or the pipe's.
type serving interface {
	Serve(ctx context.Context, h Handler) error
	Close() error
}

// serveLoop keeps a channel up: it listens, serves until the listener
// fails, and retries with capped backoff, reporting the channel's state at
// each change. name ("admin socket") and where (its path) label the logs
// and the state. It returns nil when ctx ends, and ErrNotSupported where
// the platform has no such channel.
func (s *Server) serveLoop(ctx context.Context, name, where string, listen func(Options) (serving, error)) error {
	set := func(st State) {
		st.Path = where
		s.setState(st)
	}
	delay := s.opts.RetryMin
	for {
		l, err := listen(s.opts)
		if errors.Is(err, ErrNotSupported) {
			set(State{State: StateUnavailable, Reason: err.Error()})
			return err
		}
		if err == nil {
			s.opts.Log.Info(name+" listening", "path", where, "admin_group", s.opts.AdminGroup)
			set(State{State: StateAvailable})
			delay = s.opts.RetryMin
			err = l.Serve(ctx, s.h)
			if cerr := l.Close(); cerr != nil {
				s.opts.Log.Warn(name+" cleanup", "err", cerr)
			}
			if ctx.Err() != nil {
				set(State{State: StateUnavailable, Reason: "the service is stopping"})
				return nil
			}
			if err == nil {
				err = errors.New("the listener closed")
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		s.opts.Log.Warn(name+" unavailable; retrying", "path", where, "err", err, "in", delay)
		set(State{State: StateUnavailable, Reason: err.Error()})
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, s.opts.RetryMax)
	}
}

// UntrustedError is Dial's refusal of a server it cannot trust. Nothing was
// sent to it.
type UntrustedError struct {
	Path   string
	UID    uint32
	Reason string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("adminsock: %s is served by uid %d, which is not trusted: %s", e.Path, e.UID, e.Reason)
}

// ErrNoService wraps Dial's failures to reach a server at all: no socket
// at the path, or nothing listening on it.
var ErrNoService = errors.New("no service is listening on the admin socket")

// Conn is a connection to a server Dial checked.
type Conn struct {
	*net.UnixConn
	// Server is the kernel's report of the process that serves the socket.
	Server Identity
}

// Dial connects to the admin socket at path and checks who serves it before
// anything is sent: the kernel's report of the listening process
// (SO_PEERCRED) must be root, or an account that owns both the socket file
// and its directory, where no other account may write. Otherwise it closes
// the connection and returns *UntrustedError.
func Dial(ctx context.Context, path string) (*Conn, error) {
	c, id, err := dial(ctx, path)
	if err != nil {
		return nil, err
	}
	return &Conn{UnixConn: c, Server: id}, nil
}

// Request sends one request over this platform's admin channel (the socket
// at path, or the Windows pipe) and returns the answer, after the channel's
// check of who serves it.
func Request(ctx context.Context, path string, request []byte) ([]byte, error) {
	c, err := DialChannel(ctx, path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Exchange(ctx, request)
}

// Exchange sends the connection's one request, shuts down the writing side
// to mark its end, and reads the answer up to MaxAnswerBytes.
func (c *Conn) Exchange(ctx context.Context, request []byte) ([]byte, error) {
	return exchange(ctx, c.UnixConn, request)
}
