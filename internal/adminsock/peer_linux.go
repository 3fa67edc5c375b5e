//go:build linux

package adminsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initialGroups is the first SO_PEERGROUPS buffer, in gids; tests shrink it
// to exercise the ERANGE path.
var initialGroups = 64

// maxGroups is NGROUPS_MAX: no process holds more.
const maxGroups = 65536

// peerIdentity asks the kernel who connected: SO_PEERCRED for pid, uid and
// gid, SO_PEERGROUPS for supplementary groups. A failure to read the groups
// leaves GroupsKnown false, which makes a non-root caller a standard account.
func peerIdentity(c *net.UnixConn) (Identity, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			credErr = fmt.Errorf("SO_PEERCRED: %w", err)
			return
		}
		id.UID, id.GID, id.PID = cred.Uid, cred.Gid, cred.Pid
		if groups, err := peerGroups(int(fd), initialGroups); err == nil {
			id.Groups, id.GroupsKnown = groups, true
		}
	})
	if err == nil {
		err = credErr
	}
	return id, err
}

// peerGroups reads SO_PEERGROUPS, which x/sys/unix has no helper for: the
// kernel answers ERANGE with the size it needs when the buffer is short, so
// the buffer grows until the list fits.
func peerGroups(fd, n int) ([]uint32, error) {
	n = max(n, 1)
	for {
		buf := make([]uint32, n)
		size := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			if size%4 != 0 || int(size/4) > len(buf) {
				return nil, fmt.Errorf("SO_PEERGROUPS: unexpected length %d", size)
			}
			return buf[:size/4], nil
		case errno != unix.ERANGE:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
		need := int(size / 4)
		if need <= n {
			need = 2 * n
		}
		if need > maxGroups {
			return nil, fmt.Errorf("SO_PEERGROUPS: %d groups is more than a process can hold", need)
		}
		n = need
	}
}

func dial(ctx context.Context, path string) (*net.UnixConn, Identity, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOTDIR) {
			return nil, Identity{}, fmt.Errorf("%w (%s: %v)", ErrNoService, path, errors.Unwrap(errors.Unwrap(err)))
		}
		return nil, Identity{}, fmt.Errorf("adminsock: connect to %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	id, err := peerIdentity(uc)
	if err != nil {
		uc.Close()
		return nil, Identity{}, &UntrustedError{Path: path, UID: id.UID, Reason: "the kernel did not say who serves it: " + err.Error()}
	}
	if reason := untrusted(path, id.UID); reason != "" {
		uc.Close()
		return nil, Identity{}, &UntrustedError{Path: path, UID: id.UID, Reason: reason}
	}
	return uc, id, nil
}

// untrusted says why a server running as uid cannot be trusted with a
// request sent to path, or "" when it can: root always can; another account
// only when it owns both the socket file and its directory and no other
// account may write that directory, so nobody else could have put the
// socket there.
func untrusted(path string, uid uint32) string {
	if uid == 0 {
		return ""
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "cannot resolve the socket's path: " + err.Error()
	}
	var st unix.Stat_t
	if err := unix.Lstat(real, &st); err != nil {
		return "cannot stat the socket: " + err.Error()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return real + " is not a socket"
	}
	if st.Uid != uid {
		return fmt.Sprintf("the socket %s is owned by uid %d, not by the serving account", real, st.Uid)
	}
	dir := filepath.Dir(real)
	if err := unix.Lstat(dir, &st); err != nil {
		return "cannot stat the socket's directory: " + err.Error()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dir + " is not a directory"
	}
	if st.Uid != uid {
		return fmt.Sprintf("the socket's directory %s is owned by uid %d, not by the serving account", dir, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Sprintf("other accounts may write the socket's directory %s (mode %04o)", dir, st.Mode&0o7777)
	}
	return ""
}
