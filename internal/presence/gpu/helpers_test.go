package gpu

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// TestMain lets the test binary double as the helper processes the /proc
// discovery tests need: a "server" that listens on TCP and starts a child.
func TestMain(m *testing.M) {
	switch os.Getenv("GPU_TEST_HELPER") {
	case "server":
		helperServer()
		return
	case "child":
		io.Copy(io.Discard, os.Stdin) // live until the test closes stdin
		return
	}
	os.Exit(m.Run())
}

func helperServer() {
	ln, err := net.Listen("tcp", os.Getenv("GPU_TEST_LISTEN"))
	if err != nil {
		fmt.Printf("error=%v\n", err)
		os.Exit(2)
	}
	exe, _ := os.Executable()
	child := exec.Command(exe)
	child.Env = append(os.Environ(), "GPU_TEST_HELPER=child")
	child.Stdin = os.Stdin
	if err := child.Start(); err != nil {
		fmt.Printf("error=%v\n", err)
		os.Exit(2)
	}
	fmt.Printf("port=%d child=%d\n", ln.Addr().(*net.TCPAddr).Port, child.Process.Pid)
	io.Copy(io.Discard, os.Stdin)
	ln.Close()
	child.Wait()
}

// helperProc is a running helper server and its child.
type helperProc struct {
	pid, childPID, port int
}

// startServer starts a helper server listening on addr; cleanup ends it
// and its child.
func startServer(t *testing.T, addr string) helperProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	// The race detector would otherwise sleep a second at each helper's exit.
	cmd.Env = append(os.Environ(), "GPU_TEST_HELPER=server", "GPU_TEST_LISTEN="+addr, "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper server: %v", err)
	}
	if strings.HasPrefix(line, "error=") {
		t.Skipf("helper cannot listen on %s: %s", addr, strings.TrimSpace(line))
	}
	h := helperProc{pid: cmd.Process.Pid}
	if _, err := fmt.Sscanf(line, "port=%d child=%d", &h.port, &h.childPID); err != nil {
		t.Fatalf("helper server said %q: %v", line, err)
	}
	return h
}

// recordingSink records what sources report.
type recordingSink struct {
	mu       sync.Mutex
	events   []string
	pressure map[string]lending.Pressure // source/resource
	ready    map[string]readiness
	reports  map[string]int // source/resource -> number of pressure reports
}

type readiness struct {
	ready  bool
	reason string
}

func newSink() *recordingSink {
	return &recordingSink{pressure: map[string]lending.Pressure{}, ready: map[string]readiness{}, reports: map[string]int{}}
}

func (r *recordingSink) ReportActivity(string, lending.Activity) {}
func (r *recordingSink) Forget(string)                           {}

func (r *recordingSink) ReportPressure(source string, p lending.Pressure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := source + "/" + p.Resource
	r.pressure[k] = p
	r.reports[k]++
	r.events = append(r.events, fmt.Sprintf("pressure %s active=%t %q", k, p.Active, p.Reason))
}

func (r *recordingSink) SetReady(source string, ready bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready[source] = readiness{ready, reason}
	r.events = append(r.events, fmt.Sprintf("ready %s %t %q", source, ready, reason))
}

// state is a copy of what the sink holds.
type state struct {
	pressure map[string]lending.Pressure
	ready    map[string]readiness
	reports  map[string]int
	events   []string
}

func (r *recordingSink) snapshot() state {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := state{pressure: map[string]lending.Pressure{}, ready: map[string]readiness{}, reports: map[string]int{}, events: append([]string(nil), r.events...)}
	for k, v := range r.pressure {
		s.pressure[k] = v
	}
	for k, v := range r.ready {
		s.ready[k] = v
	}
	for k, v := range r.reports {
		s.reports[k] = v
	}
	return s
}

// waitTimeout is a generous bound: the waits are for things that happen
// within a poll or two.
const waitTimeout = 20 * time.Second

// waitFor waits until cond holds on the sink's state.
func (r *recordingSink) waitFor(t *testing.T, what string, cond func(state) bool) state {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		s := r.snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; events:\n%s", what, strings.Join(s.events, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeNVML is an NVML whose devices the test sets.
type fakeNVML struct {
	mu        sync.Mutex
	initErr   error
	inits     int
	shutdowns int
	countErr  error
	devices   []fakeDevice
	reads     int // Processes calls
}

type fakeDevice struct {
	procs   []GPUProcess
	util    map[uint32]int
	utilErr error
	err     error
}

func (f *fakeNVML) Init() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inits++
	return f.initErr
}

func (f *fakeNVML) Shutdown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdowns++
	return nil
}

func (f *fakeNVML) DeviceCount() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.devices), f.countErr
}

func (f *fakeNVML) Name(i int) (string, error) { return fmt.Sprintf("Fake GPU %d", i), nil }

func (f *fakeNVML) Memory(int) (MemoryInfo, error) { return MemoryInfo{Total: 24 << 30}, nil }

func (f *fakeNVML) Processes(i int) ([]GPUProcess, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if i >= len(f.devices) {
		return nil, fmt.Errorf("device %d: no such device", i)
	}
	d := f.devices[i]
	return append([]GPUProcess(nil), d.procs...), d.err
}

func (f *fakeNVML) ProcessUtilization(i int, _ time.Time) (map[uint32]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.devices[i]
	if d.utilErr != nil {
		return nil, d.utilErr
	}
	m := map[uint32]int{}
	for k, v := range d.util {
		m[k] = v
	}
	return m, nil
}

// set replaces device i.
func (f *fakeNVML) set(i int, d fakeDevice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.devices) <= i {
		f.devices = append(f.devices, fakeDevice{})
	}
	f.devices[i] = d
}

func (f *fakeNVML) setInitErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initErr = err
}

func (f *fakeNVML) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// fakeProc is a proc filesystem the test writes.
type fakeProc struct {
	t    *testing.T
	root string
	tcp  []string
}

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

func newFakeProc(t *testing.T) *fakeProc {
	f := &fakeProc{t: t, root: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(f.root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.writeTCP()
	writeAtomic(t, filepath.Join(f.root, "net", "tcp6"), tcpHeader)
	return f
}

// hexAddrPort writes an address as /proc/net/tcp does.
func hexAddrPort(ap netip.AddrPort) string {
	b := ap.Addr().AsSlice()
	out := make([]byte, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.NativeEndian.Uint32(b[i:]))
	}
	return strings.ToUpper(hex.EncodeToString(out)) + fmt.Sprintf(":%04X", ap.Port())
}

func (f *fakeProc) listen(addr string, inode uint64) {
	line := fmt.Sprintf("%4d: %s 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
		len(f.tcp), hexAddrPort(netip.MustParseAddrPort(addr)), inode)
	f.tcp = append(f.tcp, line)
	f.writeTCP()
}

func (f *fakeProc) writeTCP() {
	writeAtomic(f.t, filepath.Join(f.root, "net", "tcp"), tcpHeader+strings.Join(f.tcp, ""))
}

// process adds a process with its parent, name and socket descriptors.
func (f *fakeProc) process(pid, ppid int, comm string, sockets ...uint64) {
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	writeAtomic(f.t, filepath.Join(dir, "comm"), comm+"\n")
	writeAtomic(f.t, filepath.Join(dir, "stat"), fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560\n", pid, comm, ppid, pid, pid))
	for i, ino := range sockets {
		if err := os.Symlink(fmt.Sprintf("socket:[%d]", ino), filepath.Join(dir, "fd", strconv.Itoa(3+i))); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fakeProc) remove(pid int) {
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
