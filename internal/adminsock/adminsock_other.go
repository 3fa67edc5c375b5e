//go:build !linux

package adminsock

import (
	"context"
	"log/slog"
	"net"
)

// sysListener is never built here: Listen fails first.
type sysListener struct{}

func (*sysListener) removeOurs(*slog.Logger) error { return nil }

func (*sysListener) release() {}

func listen(Options) (*Listener, error) { return nil, ErrNotSupported }

func peerIdentity(*net.UnixConn) (Identity, error) { return Identity{}, ErrNotSupported }

func dial(context.Context, string) (*net.UnixConn, Identity, error) {
	return nil, Identity{}, ErrNotSupported
}
