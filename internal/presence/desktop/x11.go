package desktop

import (
	"context"
	"errors"
	"io"
	"log"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/screensaver"
	"github.com/jezek/xgb/xproto"
)

var quietXGB sync.Once

// X11 reads the X server's MIT-SCREEN-SAVER idle time (XScreenSaverQueryInfo
// ms_since_user_input) on display (DISPLAY). In a Wayland session it
// refuses: Xwayland sees only the input that goes to X clients, so its idle
// time would grow while the owner works in Wayland windows.
func X11(display string, wayland bool) Candidate {
	return Candidate{Name: "x11", Open: func(ctx context.Context) (IdleSource, error) {
		if wayland {
			return nil, errors.New("a Wayland session: Xwayland's idle time misses Wayland clients' input")
		}
		if display == "" {
			return nil, errors.New("DISPLAY is not set")
		}
		// xgb logs to stderr on its own; its errors come back as values.
		quietXGB.Do(func() { xgb.Logger = log.New(io.Discard, "", 0) })
		conn, err := xgb.NewConnDisplay(display)
		if err != nil {
			return nil, err
		}
		if err := screensaver.Init(conn); err != nil {
			conn.Close()
			return nil, err
		}
		root := xproto.Setup(conn).DefaultScreen(conn).Root
		return &x11Idle{conn: conn, root: root}, nil
	}}
}

type x11Idle struct {
	conn *xgb.Conn
	root xproto.Window
}

func (x *x11Idle) Name() string { return "x11" }

func (x *x11Idle) Idle(ctx context.Context) (time.Duration, error) {
	type answer struct {
		ms  uint32
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := screensaver.QueryInfo(x.conn, xproto.Drawable(x.root)).Reply()
		switch {
		case err != nil:
			ch <- answer{err: err}
		case r == nil:
			ch <- answer{err: errors.New("x11: no answer to QueryInfo")}
		default:
			ch <- answer{ms: r.MsSinceUserInput}
		}
	}()
	select {
	case a := <-ch:
		return time.Duration(a.ms) * time.Millisecond, a.err
	case <-ctx.Done():
		// A server that does not answer: the reporter gives the source up
		// after a few of these and closes the connection, which ends the
		// query.
		return 0, ctx.Err()
	}
}

func (x *x11Idle) Close() error {
	x.conn.Close()
	return nil
}
