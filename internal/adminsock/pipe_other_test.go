//go:build !windows

package adminsock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// Outside Windows the pipe and the approval prompt say they are not
// supported, and DialChannel is the socket's Dial.
func TestPipeNotSupportedHere(t *testing.T) {
	if _, err := ListenPipe(Options{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("ListenPipe = %v, want ErrNotSupported", err)
	}
	if _, err := DialPipe(context.Background()); !errors.Is(err, ErrNotSupported) {
		t.Errorf("DialPipe = %v, want ErrNotSupported", err)
	}
	if code, err := RunElevated(context.Background(), []byte("{}"), ElevateOptions{}); !errors.Is(err, ErrNotSupported) || code != -1 {
		t.Errorf("RunElevated = %d, %v; want -1, ErrNotSupported", code, err)
	}
	if err := NewServer(Options{}, &pipeHandler{}).RunPipe(context.Background()); !errors.Is(err, ErrNotSupported) {
		t.Errorf("RunPipe = %v, want ErrNotSupported", err)
	}
	c, err := DialChannel(context.Background(), filepath.Join(t.TempDir(), "none.sock"))
	if c != nil || err == nil {
		t.Fatalf("DialChannel to no socket = %v, %v; want nil and an error", c, err)
	}
	if IsUntrusted(err) {
		t.Errorf("a missing socket counted as untrusted: %v", err)
	}
}
