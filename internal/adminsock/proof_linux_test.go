//go:build linux

package adminsock_test

// These tests prove the socket's rules end to end, as root: the service runs
// in the test process over a real admin.Service, and every client is the real
// vacancyd binary (`vacancyd admin-request`) started as another uid and gid
// with exactly the supplementary groups the case needs. Accounts and groups
// are throwaway ones made with useradd/groupadd and deleted afterwards.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
	"github.com/vacancyd/vacancyd/internal/cli"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// envServe makes the test binary a stand-in server that is not vacancyd:
// it listens on the path given, reports "ready", then reports how many
// bytes the first client sent.
const envServe = "ADMINSOCK_TEST_FAKE_SERVER"

// hang only stops a stuck child from hanging the suite; no test asserts time.
const hang = 2 * time.Minute

func TestMain(m *testing.M) {
	if p := os.Getenv(envServe); p != "" {
		os.Exit(fakeServer(p))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func fakeServer(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	if err := os.Chmod(path, 0o666); err != nil {
		fmt.Println("chmod:", err)
		return 1
	}
	fmt.Println("ready")
	c, err := ln.Accept()
	if err != nil {
		fmt.Println("accept:", err)
		return 1
	}
	b, _ := io.ReadAll(c)
	fmt.Printf("received %d bytes\n", len(b))
	return 0
}

var (
	binOnce              sync.Once
	binDir, vacancyd, me string
	binErr               error
)

// binaries copies the real vacancyd and this test binary into a directory
// every account may read and run from.
func binaries(t *testing.T) (vacancydPath, testBinary string) {
	t.Helper()
	built := proc.Binary(t)
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "adminsock-bin-")
		if binErr != nil {
			return
		}
		if binErr = os.Chmod(binDir, 0o755); binErr != nil {
			return
		}
		self, err := os.Executable()
		if err != nil {
			binErr = err
			return
		}
		vacancyd, me = filepath.Join(binDir, "vacancyd"), filepath.Join(binDir, "adminsock.test")
		for src, dst := range map[string]string{built: vacancyd, self: me} {
			b, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(dst, b, 0o755)
			}
			if err != nil {
				binErr = err
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return vacancyd, me
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: clients run as other uids, and the test makes throwaway accounts")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel", "gpasswd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (passwd package) to make throwaway accounts", tool)
		}
	}
}

// shadowTool runs useradd and friends, retrying while another process
// holds the account database's lock (their exit code 10).
func shadowTool(t *testing.T, name string, args ...string) {
	t.Helper()
	for range 50 {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err == nil {
			return
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 10 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	t.Fatalf("%s %v: the account database stayed locked", name, args)
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "vsk" + hex.EncodeToString(b)
}

// newGroup makes a throwaway group and returns its name and gid.
func newGroup(t *testing.T) (string, uint32) {
	t.Helper()
	name := unique(t) + "-adm"
	shadowTool(t, "groupadd", name)
	t.Cleanup(func() { shadowTool(t, "groupdel", name) })
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.ParseUint(g.Gid, 10, 32)
	return name, uint32(gid)
}

type account struct {
	name     string
	uid, gid uint32
}

// newUser makes a throwaway account with no home; primary names its
// primary group, or "" for the system default.
func newUser(t *testing.T, role, primary string) account {
	t.Helper()
	name := unique(t) + "-" + role
	args := []string{"-M", "-s", "/usr/sbin/nologin"}
	if primary != "" {
		args = append(args, "-g", primary)
	} else {
		args = append(args, "-N")
	}
	shadowTool(t, "useradd", append(args, name)...)
	t.Cleanup(func() { shadowTool(t, "userdel", name) })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return account{name: name, uid: uint32(uid), gid: uint32(gid)}
}

// openTempDir is a temporary directory every account can traverse.
func openTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// identities records the kernel's identity of each request's peer.
type identities struct {
	mu  sync.Mutex
	ids []adminsock.Identity
}

func (r *identities) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

func (r *identities) last() adminsock.Identity {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return adminsock.Identity{}
	}
	return r.ids[len(r.ids)-1]
}

type service struct {
	path string
	svc  *admin.Service
	seen *identities
}

// startService serves a real admin.Service on a socket in a fresh
// directory, with adminGroup as server.admin_group.
func startService(t *testing.T, adminGroup string) service {
	t.Helper()
	path := filepath.Join(openTempDir(t), "run", "admin.sock")
	svc := admin.New(lending.NewSwitches(true, map[string]bool{"gpu0": true}), new(slog.LevelVar), nil)
	t.Cleanup(svc.Close)
	l, err := adminsock.Listen(adminsock.Options{Path: path, AdminGroup: adminGroup})
	if err != nil {
		t.Fatal(err)
	}
	seen := &identities{}
	h := admin.Handlers{Service: svc}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- l.Serve(ctx, adminsock.HandlerFunc(func(ctx context.Context, c admin.Caller, req []byte) admin.Response {
			if id, ok := adminsock.IdentityFrom(ctx); ok {
				seen.mu.Lock()
				seen.ids = append(seen.ids, id)
				seen.mu.Unlock()
			}
			return h.Handle(ctx, c, req)
		}))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		l.Close()
	})
	return service{path: path, svc: svc, seen: seen}
}

// as is who runs a client: uid, gid and exactly these supplementary groups.
type as struct {
	uid, gid uint32
	groups   []uint32
}

type result struct {
	stdout, stderr string
	code           int
}

// adminRequest runs `vacancyd admin-request --request - --socket sock` as w.
func adminRequest(t *testing.T, sock string, w as, req string) result {
	t.Helper()
	bin, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "admin-request", "--request", "-", "--socket", sock)
	cmd.Stdin = strings.NewReader(req)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: w.uid, Gid: w.gid, Groups: w.groups}}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run admin-request: %v", err)
		}
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

func setResource(enabled bool) string {
	return fmt.Sprintf(`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": %v}}`, enabled)
}

const (
	pauseReq  = `{"protocol_version": 1, "action": {"kind": "pause"}}`
	resumeReq = `{"protocol_version": 1, "action": {"kind": "resume"}}`
)

// Who is an administrator on the socket: root; an account whose process
// holds the admin group and whom the group database lists now; not one that
// only holds it, only is listed, or neither; and with no admin group
// configured, root alone.
func TestSocketAdministrators(t *testing.T) {
	needRoot(t)
	group, gid := newGroup(t)
	alice := newUser(t, "alice", "")  // listed
	carol := newUser(t, "carol", "")  // listed, then removed
	bob := newUser(t, "bob", "")      // never a member
	dave := newUser(t, "dave", group) // the group is her primary group
	shadowTool(t, "gpasswd", "-a", alice.name, group)
	shadowTool(t, "gpasswd", "-a", carol.name, group)
	// carol signed in while a member; her processes still hold the group
	// after she is taken off the list.
	shadowTool(t, "gpasswd", "-d", carol.name, group)

	s := startService(t, group)
	gpu0 := func() bool { return s.svc.Switches().State().Resources["gpu0"] }
	for i, tc := range []struct {
		name string
		who  as
		want int
	}{
		{"root", as{0, 0, nil}, cli.ExitOK},
		{"holds the group and is listed", as{alice.uid, alice.gid, []uint32{alice.gid, gid}}, cli.ExitOK},
		{"holds the group, no longer listed", as{carol.uid, carol.gid, []uint32{carol.gid, gid}}, cli.ExitRefused},
		{"listed, but the process does not hold the group", as{alice.uid, alice.gid, []uint32{alice.gid}}, cli.ExitRefused},
		{"holds the group, never listed", as{bob.uid, bob.gid, []uint32{gid}}, cli.ExitRefused},
		{"not a member", as{bob.uid, bob.gid, nil}, cli.ExitRefused},
		{"primary group is the admin group", as{dave.uid, dave.gid, nil}, cli.ExitOK},
	} {
		before := gpu0()
		r := adminRequest(t, s.path, tc.who, setResource(!before))
		if r.code != tc.want {
			t.Errorf("%s: exit %d, want %d (stdout %q, stderr %q)", tc.name, r.code, tc.want, r.stdout, r.stderr)
			continue
		}
		if tc.want == cli.ExitOK {
			want := fmt.Sprintf(`{"outcome":"resource","resource":"gpu0","enabled":%v}`+"\n", !before)
			if r.stdout != want || gpu0() == before {
				t.Errorf("%s: printed %q, gpu0 %v -> %v", tc.name, r.stdout, before, gpu0())
			}
		} else if gpu0() != before || r.stdout != "" || !strings.Contains(r.stderr, "administrator_required") {
			t.Errorf("%s: refused yet gpu0 %v -> %v, stdout %q, stderr %q", tc.name, before, gpu0(), r.stdout, r.stderr)
		}
		if id := s.seen.last(); id.UID != tc.who.uid || !id.GroupsKnown {
			t.Errorf("case %d %s: the service saw %+v", i, tc.name, id)
		}
	}

	// An empty server.admin_group leaves root the only administrator.
	rootOnly := startService(t, "")
	if r := adminRequest(t, rootOnly.path, as{alice.uid, alice.gid, []uint32{alice.gid, gid}}, setResource(false)); r.code != cli.ExitRefused {
		t.Errorf("admin group member with admin_group empty: exit %d (%s)", r.code, r.stderr)
	}
	if r := adminRequest(t, rootOnly.path, as{0, 0, nil}, setResource(false)); r.code != cli.ExitOK {
		t.Errorf("root with admin_group empty: exit %d (%s)", r.code, r.stderr)
	}
}

// Who may resume: the account that paused; not another standard account,
// and not over a pause that names no account (a token or TCP loopback);
// pausing again does not take a pause over.
func TestSocketWhoMayResume(t *testing.T) {
	needRoot(t)
	bob := newUser(t, "bob", "")
	erin := newUser(t, "erin", "")
	asBob := as{bob.uid, bob.gid, nil}
	asErin := as{erin.uid, erin.gid, nil}
	s := startService(t, "")
	state := func() lending.SwitchState { return s.svc.Switches().State() }

	if r := adminRequest(t, s.path, asBob, pauseReq); r.code != cli.ExitOK || r.stdout != `{"outcome":"lending","lending_enabled":false}`+"\n" {
		t.Fatalf("standard account pausing: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if st := state(); st.LendingEnabled || st.PausedBy.Account != "uid:"+strconv.Itoa(int(bob.uid)) || st.PausedBy.Via != "socket" {
		t.Fatalf("after bob's pause: %+v %+v", st, st.PausedBy)
	}
	if r := adminRequest(t, s.path, asBob, resumeReq); r.code != cli.ExitOK || r.stdout != `{"outcome":"lending","lending_enabled":true}`+"\n" {
		t.Fatalf("resuming one's own pause: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	adminRequest(t, s.path, asBob, pauseReq)
	if r := adminRequest(t, s.path, asErin, resumeReq); r.code != cli.ExitRefused || state().LendingEnabled {
		t.Fatalf("another account resumed bob's pause: exit %d", r.code)
	}
	if r := adminRequest(t, s.path, asErin, pauseReq); r.code != cli.ExitOK {
		t.Fatalf("pausing a paused service: exit %d", r.code)
	}
	if r := adminRequest(t, s.path, asErin, resumeReq); r.code != cli.ExitRefused || state().LendingEnabled {
		t.Fatal("a second pause let erin take bob's pause over")
	}
	if r := adminRequest(t, s.path, asBob, resumeReq); r.code != cli.ExitOK || !state().LendingEnabled {
		t.Fatalf("bob could not resume his pause: exit %d %s", r.code, r.stderr)
	}

	// A pause by token (or over TCP loopback) names no account.
	s.svc.Pause(admin.Caller{Via: "http"})
	if r := adminRequest(t, s.path, asBob, resumeReq); r.code != cli.ExitRefused || state().LendingEnabled {
		t.Fatalf("a standard account resumed a token pause: exit %d", r.code)
	}
	if r := adminRequest(t, s.path, as{0, 0, nil}, resumeReq); r.code != cli.ExitOK || !state().LendingEnabled {
		t.Fatalf("root could not resume a token pause: exit %d %s", r.code, r.stderr)
	}
}

// The kernel's group list reaches the service whole, however long: the
// SO_PEERGROUPS read grows its buffer past its first guess.
func TestSocketManyGroups(t *testing.T) {
	needRoot(t)
	bob := newUser(t, "bob", "")
	s := startService(t, "")
	groups := make([]uint32, 300)
	for i := range groups {
		groups[i] = 61000 + uint32(i)
	}
	if r := adminRequest(t, s.path, as{bob.uid, bob.gid, groups}, pauseReq); r.code != cli.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	id := s.seen.last()
	if !id.GroupsKnown || len(id.Groups) != len(groups) || id.UID != bob.uid || id.GID != bob.gid {
		t.Fatalf("the service saw uid %d gid %d and %d groups (known %v), want %d", id.UID, id.GID, len(id.Groups), id.GroupsKnown, len(groups))
	}
	for i, g := range groups {
		if id.Groups[i] != g {
			t.Fatalf("group %d is %d, want %d", i, id.Groups[i], g)
		}
	}
}

// admin-request checks who serves the socket before sending: a server
// running as an account that does not own both the socket and a directory
// nobody else may write gets exit 40 and not one byte. The trusted layout
// is the control: the same stand-in server then does receive the request.
func TestAdminRequestUntrustedServer(t *testing.T) {
	needRoot(t)
	mallory := newUser(t, "mallory", "")
	bob := newUser(t, "bob", "")
	_, testBin := binaries(t)

	for _, tc := range []struct {
		name     string
		dirOwner func(a account) int
		perm     os.FileMode // while the stand-in binds
		after    os.FileMode // then
		client   as
		trusted  bool
	}{
		{"its own directory, writable by others", func(a account) int { return int(a.uid) }, 0o777, 0o777, as{0, 0, nil}, false},
		{"its own directory, writable by others, standard client", func(a account) int { return int(a.uid) }, 0o777, 0o777, as{bob.uid, bob.gid, nil}, false},
		{"a directory it does not own", func(account) int { return 0 }, 0o777, 0o755, as{0, 0, nil}, false},
		{"its own directory, closed to others", func(a account) int { return int(a.uid) }, 0o755, 0o755, as{0, 0, nil}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(openTempDir(t), "sock")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, tc.dirOwner(mallory), int(mallory.gid)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.perm); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "admin.sock")

			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			srv := exec.CommandContext(ctx, testBin)
			srv.Env = []string{envServe + "=" + path}
			srv.Dir = "/"
			srv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: mallory.uid, Gid: mallory.gid}}
			out, err := srv.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Wait()
			lines := bufio.NewScanner(out)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("stand-in server: %q", lines.Text())
			}
			if err := os.Chmod(dir, tc.after); err != nil {
				t.Fatal(err)
			}

			r := adminRequest(t, path, tc.client, pauseReq)
			if !lines.Scan() {
				t.Fatal("the stand-in server said nothing")
			}
			received := lines.Text()
			if tc.trusted {
				// Trusted, so the request went out; the stand-in never
				// answers, which is a failed exchange, not a refusal.
				if r.code != cli.ExitActionFailed || received == "received 0 bytes" {
					t.Fatalf("trusted server: exit %d, %s, stderr %q", r.code, received, r.stderr)
				}
				return
			}
			if r.code != cli.ExitUntrustedServer || received != "received 0 bytes" {
				t.Fatalf("exit %d (want 40), server %s; stderr %q", r.code, received, r.stderr)
			}
			if !strings.Contains(r.stderr, "not trusted") || !strings.Contains(r.stderr, "nothing was sent") || r.stdout != "" {
				t.Errorf("stderr %q stdout %q", r.stderr, r.stdout)
			}
		})
	}
}

// The real binary's other outcomes against a real service: no socket, a
// socket nobody listens on, and a request file that is not one valid
// request (which never reaches the service).
func TestAdminRequestNoServiceAndBadRequest(t *testing.T) {
	needRoot(t)
	bob := newUser(t, "bob", "")
	asBob := as{bob.uid, bob.gid, nil}
	dir := openTempDir(t)
	if r := adminRequest(t, filepath.Join(dir, "none.sock"), asBob, pauseReq); r.code != cli.ExitNoService {
		t.Errorf("missing socket: exit %d, %s", r.code, r.stderr)
	}
	dead := filepath.Join(dir, "dead.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	os.Chmod(dead, 0o666)
	if r := adminRequest(t, dead, asBob, pauseReq); r.code != cli.ExitNoService {
		t.Errorf("socket nobody listens on: exit %d, %s", r.code, r.stderr)
	}

	s := startService(t, "")
	for _, req := range []string{
		``,
		`{"protocol_version": 1, "action": {"kind": "reboot"}}`,
		`{"protocol_version": 9, "action": {"kind": "pause"}}`,
		pauseReq + pauseReq,
	} {
		if r := adminRequest(t, s.path, asBob, req); r.code != cli.ExitBadRequest {
			t.Errorf("request %q: exit %d, %s", req, r.code, r.stderr)
		}
	}
	if s.seen.count() != 0 || !s.svc.Switches().State().LendingEnabled {
		t.Error("a bad request reached the service")
	}
}
