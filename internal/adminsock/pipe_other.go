//go:build !windows

package adminsock

import "context"

// Outside Windows there is no admin pipe and no approval prompt; the local
// admin channel is the socket (listen_linux.go, or adminsock_other.go's
// refusal).

func listenPipe(Options) (*PipeListener, error) { return nil, ErrNotSupported }

// DialPipe connects to the Windows admin pipe; here it returns
// ErrNotSupported.
func DialPipe(context.Context) (*PipeConn, error) { return nil, ErrNotSupported }

func dialChannel(ctx context.Context, socketPath string) (Channel, error) {
	c, err := Dial(ctx, socketPath)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// RunElevated runs admin-request through the Windows approval prompt; here
// it returns ErrNotSupported.
func RunElevated(context.Context, []byte, ElevateOptions) (int, error) {
	return -1, ErrNotSupported
}
