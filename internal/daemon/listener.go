package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"

	"golang.org/x/net/netutil"

	"github.com/vacancyd/vacancyd/internal/config"
)

// server is one listener and the http.Server that serves it, with the
// [server.limits] that apply to every listener.
type server struct {
	name string // "api" or a gate's upstream id
	key  string // the config key that named the address, for errors
	addr string // the bound address
	ln   net.Listener
	srv  *http.Server
	log  *slog.Logger
}

// endpoint is a listener to open: the config key naming its address, the
// address, and what serves it.
type endpoint struct {
	name    string
	key     string
	addr    string
	handler http.Handler
	log     *slog.Logger
}

// listenAll opens every endpoint, or none: on a failure it closes those
// already open and returns the error.
func listenAll(lim config.Limits, eps []endpoint) ([]*server, error) {
	var out []*server
	for _, ep := range eps {
		s, err := listen(ep.key, ep.addr, ep.handler, lim, ep.log)
		if s != nil {
			s.name = ep.name
		}
		if err != nil {
			for _, o := range out {
				_ = o.ln.Close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// listen opens addr and prepares, but does not start, its server.
func listen(key, addr string, h http.Handler, lim config.Limits, log *slog.Logger) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, wrapKey(key, err)
	}
	s := &server{
		key:  key,
		addr: ln.Addr().String(),
		// Connections beyond the cap wait in the kernel's accept queue instead
		// of each costing a goroutine and buffers.
		ln:  netutil.LimitListener(ln, lim.MaxConnections),
		log: log,
	}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.HeaderTimeout.Duration,
		IdleTimeout:       lim.IdleTimeout.Duration,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("listening", "key", key, "addr", s.addr)
	return s, nil
}

// serve runs until the server is shut down; it returns nil then.
func (s *server) serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return wrapKey(s.key, err)
}

// shutdown stops accepting, waits for in-flight requests until ctx ends, then
// closes whatever is left.
func (s *server) shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return err
}
