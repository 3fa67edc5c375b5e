//go:build linux

package adminsock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// useOpenat2 is switched off by tests to exercise the O_NOFOLLOW walk that
// kernels before 5.6 (or seccomp filters that refuse openat2) get.
var useOpenat2 = true

// sysListener holds what Close needs to remove only our own socket: the
// verified directory, the socket's name and identity in it, and the lock.
type sysListener struct {
	dirfd  int
	lockfd int
	name   string
	dev    uint64
	ino    uint64
}

func listen(o Options) (*Listener, error) {
	path := o.Path
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.HasSuffix(path, "/") {
		return nil, fmt.Errorf("adminsock: %q is not a clean absolute path", path)
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	dirfd, err := openSocketDir(dir)
	if err != nil {
		return nil, err
	}
	s := &sysListener{dirfd: dirfd, lockfd: -1, name: name}
	fail := func(err error) (*Listener, error) {
		s.release()
		return nil, err
	}

	if s.lockfd, err = lockFile(dirfd, name+".lock"); err != nil {
		return fail(fmt.Errorf("adminsock: %s.lock: %w", path, err))
	}
	if err := clearStale(dirfd, name, path); err != nil {
		return fail(err)
	}

	// Bind through the directory we verified rather than by name again, so
	// the socket lands in that directory whatever happens to the path
	// meanwhile.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.reach(path), Net: "unix"})
	if err != nil {
		return fail(fmt.Errorf("adminsock: listen on %s: %w", path, err))
	}
	// Removal is ours to decide at Close, by identity, not by name.
	ln.SetUnlinkOnClose(false)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		ln.Close()
		return fail(fmt.Errorf("adminsock: %s vanished after bind: %v", path, err))
	}
	s.dev, s.ino = st.Dev, st.Ino
	// Any local account may connect; connecting grants nothing by itself.
	if err := unix.Fchmodat(dirfd, name, 0o666, 0); err != nil {
		_ = s.removeOurs(nil)
		ln.Close()
		return fail(fmt.Errorf("adminsock: chmod %s: %w", path, err))
	}
	return &Listener{opts: o, ln: ln, sys: s}, nil
}

// reach names the socket through /proc/self/fd, which resolves to the
// directory file descriptor itself; without /proc, or when that name would
// not fit in sun_path, it falls back to path (the directory is then still
// one only this account can change, and the lock is held).
func (s *sysListener) reach(path string) string {
	dirName := "/proc/self/fd/" + strconv.Itoa(s.dirfd)
	p := dirName + "/" + s.name
	var st, dst unix.Stat_t
	if len(p) < 108 && unix.Stat(dirName, &st) == nil &&
		unix.Fstat(s.dirfd, &dst) == nil && st.Dev == dst.Dev && st.Ino == dst.Ino {
		return p
	}
	return path
}

// removeOurs removes the socket if the name still holds the file bind
// created; anything else there stays.
func (s *sysListener) removeOurs(log *slog.Logger) error {
	var st unix.Stat_t
	err := unix.Fstatat(s.dirfd, s.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("adminsock: stat %s at shutdown: %w", s.name, err)
	case st.Dev != s.dev || st.Ino != s.ino || st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		if log != nil {
			log.Warn("the admin socket was replaced by another file; leaving it", "name", s.name)
		}
		return nil
	}
	if err := unix.Unlinkat(s.dirfd, s.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("adminsock: remove %s: %w", s.name, err)
	}
	return nil
}

// release drops the lock and the directory.
func (s *sysListener) release() {
	if s.lockfd >= 0 {
		unix.Close(s.lockfd) // closing drops the flock
		s.lockfd = -1
	}
	if s.dirfd >= 0 {
		unix.Close(s.dirfd)
		s.dirfd = -1
	}
}

// openSocketDir opens the socket's directory without following a symbolic
// link anywhere on the way, creating only its last component (mode 0755)
// when missing, and checks what it opened: a directory, owned by this
// process's effective uid, writable by nobody else.
func openSocketDir(dir string) (int, error) {
	var fd int
	var err error
	created := false
	if dir == "/" {
		fd, err = openNoSymlinks("/")
	} else {
		parent, base := filepath.Dir(dir), filepath.Base(dir)
		pfd, perr := openNoSymlinks(parent)
		if perr != nil {
			return -1, perr
		}
		err = unix.Mkdirat(pfd, base, 0o755)
		switch {
		case err == nil:
			created = true
		case errors.Is(err, unix.EEXIST):
		default:
			unix.Close(pfd)
			return -1, fmt.Errorf("adminsock: create directory %s: %w", dir, err)
		}
		fd, err = openComponent(pfd, base, dir)
		unix.Close(pfd)
	}
	if err != nil {
		return -1, err
	}
	if created {
		// The umask may have taken more than 0755 allows; others need
		// to reach the socket.
		if err := unix.Fchmod(fd, 0o755); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("adminsock: chmod %s: %w", dir, err)
		}
	}
	if err := checkDir(fd, dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func checkDir(fd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("adminsock: stat %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("adminsock: %s is not a directory", dir)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("adminsock: refusing directory %s: owned by uid %d, not by the service's uid %d", dir, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("adminsock: refusing directory %s: writable by group or others (mode %04o)", dir, st.Mode&0o7777)
	}
	return nil
}

// openNoSymlinks opens an existing directory, refusing a symbolic link in
// any component: openat2 with RESOLVE_NO_SYMLINKS, or where the kernel lacks
// it, a walk from / opening each component with O_NOFOLLOW.
func openNoSymlinks(dir string) (int, error) {
	if useOpenat2 {
		fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ELOOP):
			return -1, fmt.Errorf("adminsock: refusing directory %s: a component of it is a symbolic link", dir)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.E2BIG), errors.Is(err, unix.EINVAL):
			// No openat2 here: walk.
		default:
			return -1, fmt.Errorf("adminsock: open directory %s: %w", dir, err)
		}
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("adminsock: open /: %w", err)
	}
	walked := ""
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		if c == "" {
			continue
		}
		walked += "/" + c
		next, err := openComponent(fd, c, walked)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openComponent opens name in dirfd as a directory, never following it if
// it is a symbolic link. full names it in errors.
func openComponent(dirfd int, name, full string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, nil
	}
	var st unix.Stat_t
	if serr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return -1, fmt.Errorf("adminsock: refusing directory %s: it is a symbolic link", full)
	}
	return -1, fmt.Errorf("adminsock: open directory %s: %w", full, err)
}

// lockFile opens (creating) and exclusively locks name in dirfd. The lock
// lives as long as the descriptor; the file stays, since removing a lock
// file reopens the race it closes.
func lockFile(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, errors.New("not a regular file")
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return -1, ErrInUse
		}
		return -1, err
	}
	return fd, nil
}

// clearStale makes room for the socket: nothing there is fine; a socket
// nobody listens on (connecting is refused) is removed; a live socket, a
// symbolic link or any other file is left alone and refused.
func clearStale(dirfd int, name, path string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("adminsock: stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("adminsock: %s exists and is %s, not a socket; leaving it alone", path, fileKind(st.Mode))
	}
	live, err := listening(dirfd, name, path)
	if err != nil {
		return fmt.Errorf("adminsock: %s: cannot tell whether anything listens on the existing socket (%v); leaving it alone", path, err)
	}
	if live {
		return fmt.Errorf("adminsock: %s: another process is listening on it; leaving it alone", path)
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("adminsock: remove stale socket %s: %w", path, err)
	}
	return nil
}

// listening connects to the socket name in dirfd: true when something
// accepts, false when the kernel refuses the connection, an error otherwise.
func listening(dirfd int, name, path string) (bool, error) {
	p := (&sysListener{dirfd: dirfd, name: name}).reach(path)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrUnix{Name: p})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ECONNREFUSED):
		return false, nil
	case errors.Is(err, unix.EAGAIN):
		// The backlog is full: someone is listening.
		return true, nil
	}
	return false, err
}

func fileKind(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "another kind of file"
}
