//go:build linux

package adminsock

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
)

// okHandler answers every request with {"outcome":"ok"} and counts them.
type okHandler struct {
	mu    sync.Mutex
	calls int
	last  admin.Caller
}

func (h *okHandler) Handle(_ context.Context, c admin.Caller, _ []byte) admin.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	h.last = c
	return admin.Response{Answer: map[string]string{"outcome": "ok"}}
}

// serve runs l until the test ends.
func serve(t *testing.T, l *Listener, h Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		l.Close()
	})
}

func ask(t *testing.T, path string) string {
	t.Helper()
	b, err := Request(context.Background(), path, []byte(`{"protocol_version": 1, "action": {"kind": "pause"}}`))
	if err != nil {
		t.Fatalf("request to %s: %v", path, err)
	}
	return string(b)
}

func mustListen(t *testing.T, path string) *Listener {
	t.Helper()
	l, err := Listen(Options{Path: path})
	if err != nil {
		t.Fatalf("Listen(%s): %v", path, err)
	}
	return l
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func mkdir(t *testing.T, p string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}

// bothWalks runs f with openat2 and with the O_NOFOLLOW walk older kernels get.
func bothWalks(t *testing.T, f func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		name := "openat2"
		if !on {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			useOpenat2 = on
			defer func() { useOpenat2 = true }()
			f(t)
		})
	}
}

// The service creates only the last component of the socket's directory,
// mode 0755 and owned by itself, makes the socket 0666, and removes it at
// shutdown.
func TestListenCreatesDirectoryAndSocket(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		base := t.TempDir()
		path := filepath.Join(base, "run", "admin.sock")
		l := mustListen(t, path)
		if m := mode(t, filepath.Dir(path)); !m.IsDir() || m.Perm() != 0o755 {
			t.Errorf("created directory mode %v, want drwxr-xr-x", m)
		}
		if m := mode(t, path); m.Type() != os.ModeSocket || m.Perm() != 0o666 {
			t.Errorf("socket mode %v, want Srw-rw-rw-", m)
		}
		serve(t, l, &okHandler{})
		if got := ask(t, path); got != `{"outcome":"ok"}` {
			t.Errorf("answer %s", got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket still there after Close: %v", err)
		}

		// Only the last component is created.
		deep := filepath.Join(base, "missing", "run", "admin.sock")
		if _, err := Listen(Options{Path: deep}); err == nil {
			t.Fatal("Listen created a missing parent")
		}
		if _, err := os.Lstat(filepath.Join(base, "missing")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing parent was created: %v", err)
		}
	})
}

// The directory is refused when it is a symbolic link or under one, owned by
// another account, writable by group or others, or not a directory; and
// nothing is created in it.
func TestListenRefusesUnsafeDirectory(t *testing.T) {
	bothWalks(t, func(t *testing.T) {
		base := t.TempDir()
		real := filepath.Join(base, "real")
		mkdir(t, real, 0o755)
		if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
			t.Fatal(err)
		}
		anc := filepath.Join(base, "anc")
		mkdir(t, anc, 0o755)
		if err := os.Symlink(anc, filepath.Join(base, "anclink")); err != nil {
			t.Fatal(err)
		}
		writable := map[string]os.FileMode{"groupw": 0o775, "otherw": 0o757, "worldw": 0o777, "sticky": 0o777 | os.ModeSticky}
		for name, perm := range writable {
			d := filepath.Join(base, name)
			mkdir(t, d, 0o700)
			if err := os.Chmod(d, perm); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			path, want, check string
		}{
			{filepath.Join(base, "link", "admin.sock"), "symbolic link", real},
			{filepath.Join(base, "anclink", "run", "admin.sock"), "symbolic link", anc},
			{filepath.Join(base, "groupw", "admin.sock"), "writable by group or others", filepath.Join(base, "groupw")},
			{filepath.Join(base, "otherw", "admin.sock"), "writable by group or others", filepath.Join(base, "otherw")},
			{filepath.Join(base, "worldw", "admin.sock"), "writable by group or others", filepath.Join(base, "worldw")},
			{filepath.Join(base, "sticky", "admin.sock"), "writable by group or others", filepath.Join(base, "sticky")},
			{filepath.Join(base, "file", "admin.sock"), "", ""},
		}
		if os.Geteuid() == 0 {
			other := filepath.Join(base, "other")
			mkdir(t, other, 0o755)
			if err := os.Chown(other, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, struct{ path, want, check string }{filepath.Join(other, "admin.sock"), "owned by uid 65534", other})
		}
		for _, tc := range cases {
			l, err := Listen(Options{Path: tc.path})
			if err == nil {
				l.Close()
				t.Errorf("Listen(%s) accepted the directory", tc.path)
				continue
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Listen(%s): %v, want it to say %q", tc.path, err, tc.want)
			}
			if tc.check != "" {
				if names := entries(t, tc.check); len(names) != 0 {
					t.Errorf("refused directory %s got entries %v", tc.check, names)
				}
			}
		}
	})
}

// An existing path is replaced only when it is a socket nothing listens on:
// a live socket, a regular file, a symbolic link and a directory are left
// exactly as they were.
func TestListenLeavesOtherFilesAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	mkdir(t, dir, 0o755)

	file := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.sock")
	mkdir(t, sub, 0o755)
	live := filepath.Join(dir, "live.sock")
	liveLn, err := net.ListenUnix("unix", &net.UnixAddr{Name: live, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer liveLn.Close()

	for _, tc := range []struct{ path, want string }{
		{file, "regular file"},
		{link, "symbolic link"},
		{sub, "directory"},
		{live, "another process is listening"},
	} {
		before := inode(t, tc.path)
		l, err := Listen(Options{Path: tc.path})
		if err == nil {
			l.Close()
			t.Errorf("Listen(%s) took over the path", tc.path)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "leaving it alone") {
			t.Errorf("Listen(%s): %v, want %q", tc.path, err, tc.want)
		}
		if after := inode(t, tc.path); after != before {
			t.Errorf("%s was replaced", tc.path)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("regular file now holds %q", b)
	}
	if got, _ := os.Readlink(link); got != target {
		t.Errorf("symlink now points at %q", got)
	}
	if b, _ := os.ReadFile(target); string(b) != "target" {
		t.Errorf("symlink target now holds %q", b)
	}
	// The live socket still works.
	c, err := net.Dial("unix", live)
	if err != nil {
		t.Fatalf("the live socket no longer answers: %v", err)
	}
	c.Close()
	ac, err := liveLn.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ac.Close()
}

// A socket nothing listens on is stale: it is replaced.
func TestListenReplacesDeadSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	mkdir(t, dir, 0o755)
	path := filepath.Join(dir, "admin.sock")
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	dead.Close()
	if _, err := net.Dial("unix", path); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("the dead socket: %v, want connection refused", err)
	}
	l := mustListen(t, path)
	serve(t, l, &okHandler{})
	ask(t, path)
}

// At shutdown the socket is removed only if it is still the one this
// Listener created.
func TestCloseLeavesReplacement(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "admin.sock")

	l := mustListen(t, path)
	if err := os.Rename(path, path+".ours"); err != nil {
		t.Fatal(err)
	}
	repl, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	repl.SetUnlinkOnClose(false)
	defer repl.Close()
	before := inode(t, path)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil || inode(t, path) != before {
		t.Fatalf("the replacement socket was removed: %v", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the replacement no longer answers: %v", err)
	}
	c.Close()

	// A regular file put in its place is left too.
	os.Remove(path)
	l = mustListen(t, path)
	os.Remove(path)
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
		t.Fatalf("the file that replaced the socket was touched: %q %v", b, err)
	}
}

// Two instances cannot race for one path: whoever holds the lock file
// serves; every other attempt fails with ErrInUse and touches nothing.
func TestLockPreventsTwoInstances(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	mkdir(t, dir, 0o755)
	path := filepath.Join(dir, "admin.sock")

	const n = 8
	var wg sync.WaitGroup
	ls := make([]*Listener, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ls[i], errs[i] = Listen(Options{Path: path})
		})
	}
	close(start)
	wg.Wait()
	var won *Listener
	for i := range n {
		switch {
		case errs[i] == nil && won == nil:
			won = ls[i]
		case errs[i] == nil:
			t.Errorf("two Listens succeeded at once")
			ls[i].Close()
		case !errors.Is(errs[i], ErrInUse):
			t.Errorf("losing Listen: %v, want ErrInUse", errs[i])
		}
	}
	if won == nil {
		t.Fatalf("no Listen succeeded: %v", errs)
	}
	serve(t, won, &okHandler{})
	ino := inode(t, path)
	if _, err := Listen(Options{Path: path}); !errors.Is(err, ErrInUse) {
		t.Errorf("second instance: %v, want ErrInUse", err)
	}
	if inode(t, path) != ino {
		t.Error("the losing instance replaced the socket")
	}
	ask(t, path)
	won.Close()
	l := mustListen(t, path) // the lock is free again
	l.Close()
}

// One request per connection, capped in size; an oversized one is answered
// invalid_request without reaching the handler, and a client that sends
// nothing is cut off.
func TestRequestLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "admin.sock")
	serve(t, mustListen(t, path), admin.Handlers{})
	big := make([]byte, admin.MaxRequestBytes+1)
	for i := range big {
		big[i] = ' '
	}
	ans, err := Request(context.Background(), path, big)
	if err != nil {
		t.Fatalf("oversized request: %v", err)
	}
	var got struct{ Error admin.ErrorBody }
	if json.Unmarshal(ans, &got) != nil || got.Error.Type != admin.ErrInvalidRequest || !strings.Contains(got.Error.Message, "larger than") {
		t.Errorf("oversized request answered %s", ans)
	}

	// A silent client gets no answer once the read deadline passes.
	quiet := filepath.Join(t.TempDir(), "run", "admin.sock")
	l, err := Listen(Options{Path: quiet, ReadTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, admin.Handlers{})
	c, err := net.Dial("unix", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	if n, err := c.Read(buf); n != 0 || err == nil {
		t.Errorf("silent client read %d bytes, %v", n, err)
	}
}

// The administrator rule over an injected database: root; otherwise hold
// the group AND be listed now; no group means root only; a database that
// fails or does not answer means a standard account.
func TestAdministratorRule(t *testing.T) {
	const gid = 4242
	db := fakeDB{gid: gid, listed: map[uint32][]uint32{1000: {100, gid}, 1001: {100}, 1002: {gid}}}
	for _, tc := range []struct {
		name  string
		id    Identity
		group string
		db    GroupDB
		want  bool
	}{
		{"root", Identity{UID: 0}, "vacancyd-admin", db, true},
		{"root without groups known", Identity{UID: 0, GroupsKnown: false}, "", db, true},
		{"held and listed", Identity{UID: 1000, GID: 100, Groups: []uint32{gid}, GroupsKnown: true}, "vacancyd-admin", db, true},
		{"held as effective gid and listed", Identity{UID: 1000, GID: gid, GroupsKnown: true}, "vacancyd-admin", db, true},
		{"primary group listed and held", Identity{UID: 1002, GID: gid, GroupsKnown: true}, "vacancyd-admin", db, true},
		{"held, no longer listed", Identity{UID: 1001, GID: 100, Groups: []uint32{gid}, GroupsKnown: true}, "vacancyd-admin", db, false},
		{"listed, not held", Identity{UID: 1000, GID: 100, Groups: []uint32{100}, GroupsKnown: true}, "vacancyd-admin", db, false},
		{"groups unknown", Identity{UID: 1000, GID: 100, GroupsKnown: false}, "vacancyd-admin", db, false},
		{"no admin group: root only", Identity{UID: 1000, GID: 100, Groups: []uint32{gid}, GroupsKnown: true}, "", db, false},
		{"group missing", Identity{UID: 1000, Groups: []uint32{gid}, GroupsKnown: true}, "vacancyd-admin", fakeDB{err: errors.New("unknown group")}, false},
		{"database hangs", Identity{UID: 1000, Groups: []uint32{gid}, GroupsKnown: true}, "vacancyd-admin", hangingDB{}, false},
	} {
		// The limit matters only to the database that never answers.
		limit := time.Hour
		if _, hangs := tc.db.(hangingDB); hangs {
			limit = time.Millisecond
		}
		got, why := administrator(context.Background(), tc.id, tc.group, tc.db, limit)
		if got != tc.want {
			t.Errorf("%s: administrator = %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

type fakeDB struct {
	gid    uint32
	listed map[uint32][]uint32
	err    error
}

func (f fakeDB) GroupID(string) (uint32, error) { return f.gid, f.err }
func (f fakeDB) UserGroupIDs(uid uint32) ([]uint32, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.listed[uid], nil
}

// hangingDB never answers, like a dead LDAP server.
type hangingDB struct{}

func (hangingDB) GroupID(string) (uint32, error) { select {} }
func (hangingDB) UserGroupIDs(uint32) ([]uint32, error) {
	select {}
}

// The client trusts root, or an account owning both the socket and a
// directory nobody else may write; nothing else.
func TestClientTrustRule(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another uid")
	}
	const u = 54321
	base := t.TempDir()
	mk := func(name string, perm os.FileMode, dirOwner, sockOwner int) string {
		d := filepath.Join(base, name)
		mkdir(t, d, perm)
		p := filepath.Join(d, "s.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if err := os.Chown(d, dirOwner, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, sockOwner, 0); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := mk("good", 0o755, u, u)
	if err := os.Symlink(filepath.Dir(good), filepath.Join(base, "goodlink")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		uid  uint32
		want string
	}{
		{good, 0, ""},
		{good, u, ""},
		{filepath.Join(base, "goodlink", "s.sock"), u, ""},
		{good, u + 1, "owned by uid 54321"},
		{mk("groupw", 0o775, u, u), u, "may write"},
		{mk("worldw", 0o777, u, u), u, "may write"},
		{mk("rootdir", 0o755, 0, u), u, "directory"},
		{mk("rootsock", 0o755, u, 0), u, "socket"},
	} {
		got := untrusted(tc.path, tc.uid)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("untrusted(%s, %d) = %q, want %q", tc.path, tc.uid, got, tc.want)
		}
	}
}

// peerGroups grows its buffer until the kernel's list fits.
func TestPeerGroupsGrows(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	want, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	got, err := peerGroups(fds[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("peer groups %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != uint32(want[i]) {
			t.Fatalf("peer groups %v, want %v", got, want)
		}
	}
}

// While the socket cannot be created the Server says why, keeps trying, and
// comes up once the cause is fixed; at shutdown it removes the socket.
func TestServerRetriesAndReportsState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	mkdir(t, dir, 0o775)
	path := filepath.Join(dir, "admin.sock")
	states := make(chan State, 16)
	s := NewServer(Options{
		Path: path, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond,
		OnState: func(st State) { states <- st },
	}, &okHandler{})
	if st := s.State(); st.State != StateUnavailable || st.Path != path {
		t.Fatalf("before Run: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	st := <-states
	if st.State != StateUnavailable || !strings.Contains(st.Reason, "writable by group or others") || st.Path != path {
		t.Fatalf("first state %+v", st)
	}
	if got := s.State(); got != st {
		t.Errorf("State() = %+v, reported %+v", got, st)
	}
	b, _ := json.Marshal(st)
	if !strings.Contains(string(b), `"state":"unavailable","reason":"adminsock: refusing directory`) {
		t.Errorf("status JSON %s", b)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if st := <-states; st.State != StateAvailable || st.Reason != "" {
		t.Fatalf("after the fix: %+v", st)
	}
	if got := ask(t, path); got != `{"outcome":"ok"}` {
		t.Errorf("answer %s", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := s.State(); st.State != StateUnavailable {
		t.Errorf("after shutdown: %+v", st)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
}
