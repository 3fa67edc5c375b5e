package gpu

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestParseHexAddrPort(t *testing.T) {
	for _, ap := range []string{"127.0.0.1:11434", "0.0.0.0:80", "[::1]:8188", "[::]:443", "192.168.1.20:65535", "[fe80::1:2:3:4]:1"} {
		want := netip.MustParseAddrPort(ap)
		got, ok := parseHexAddrPort(hexAddrPort(want))
		if !ok || got != want {
			t.Errorf("round trip of %s through %q: got %s, %t", ap, hexAddrPort(want), got, ok)
		}
	}
	// As the kernel prints them on a little-endian machine.
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		for in, want := range map[string]string{
			"0100007F:2CAA":                         "127.0.0.1:11434",
			"00000000000000000000000001000000:1FFC": "[::1]:8188",
			"0000000000000000FFFF00000100007F:0050": "127.0.0.1:80", // v4-mapped
		} {
			got, ok := parseHexAddrPort(in)
			if !ok || got != netip.MustParseAddrPort(want) {
				t.Errorf("parseHexAddrPort(%q) = %s, %t; want %s", in, got, ok, want)
			}
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:", "0100007G:0050", "01007F:0050", "0100007F:10000"} {
		if _, ok := parseHexAddrPort(bad); ok {
			t.Errorf("parseHexAddrPort(%q) accepted", bad)
		}
	}
}

func TestParseListenersKeepsOnlyListen(t *testing.T) {
	table := tcpHeader +
		"   0: 0100007F:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n" +
		"   1: 0100007F:2CAA 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0 20 4 30 10 -1\n" +
		"   2: garbage\n"
	got := parseListeners([]byte(table))
	if len(got) != 1 || got[0].inode != 4242 || got[0].addr.Port() != 11434 {
		t.Errorf("parseListeners = %+v; want the one LISTEN socket, inode 4242", got)
	}
}

func TestParseStatPPIDWithAwkwardComm(t *testing.T) {
	for line, want := range map[string]int{
		"42 (bash) S 7 42 42 0 -1":         7,
		"42 (a) b) c (d) R 9 1 1 0":        9,
		"42 (with space) S 1 42 42 0 -1 4": 1,
	} {
		got, err := parseStatPPID([]byte(line))
		if err != nil || got != want {
			t.Errorf("parseStatPPID(%q) = %d, %v; want %d", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "42 bash S 7", "42 (bash)", "42 (bash) S x"} {
		if _, err := parseStatPPID([]byte(bad)); err == nil {
			t.Errorf("parseStatPPID(%q) accepted", bad)
		}
	}
}

func TestEndpointServes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		target, socket string
		want           bool
	}{
		{"http://127.0.0.1:11434", "127.0.0.1:11434", true},
		{"http://127.0.0.1:11434", "0.0.0.0:11434", true},
		{"http://127.0.0.1:11434", "[::]:11434", true},
		{"http://127.0.0.1:11434", "127.0.0.1:11435", false},
		{"http://localhost:8188", "[::1]:8188", true},
		{"http://localhost:8188", "127.0.0.1:8188", true},
		{"http://[::1]:8188", "127.0.0.1:8188", false},
		{"http://localhost", "127.0.0.1:80", true},
		{"https://localhost", "127.0.0.1:443", true},
	} {
		ep, local, err := localEndpoint(ctx, c.target)
		if err != nil || !local {
			t.Fatalf("localEndpoint(%q) = %t, %v", c.target, local, err)
		}
		if got := ep.serves(netip.MustParseAddrPort(c.socket)); got != c.want {
			t.Errorf("%s served by a socket on %s: %t, want %t", c.target, c.socket, got, c.want)
		}
	}
	// A server on another machine has no process here.
	if _, local, err := localEndpoint(ctx, "http://192.0.2.7:11434"); err != nil || local {
		t.Errorf("remote target: local %t, err %v; want not local", local, err)
	}
	if _, _, err := localEndpoint(ctx, "http://127.0.0.1:notaport"); err == nil {
		t.Error("bad port accepted")
	}
}

// The real thing: a process listening on a TCP port is found from
// /proc/net and its descriptors, its child through the ppid chain, and
// the test process itself is neither.
func TestDiscoverRealServerAndChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	for _, c := range []struct{ listen, host string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"127.0.0.1:0", "localhost"},
		{"0.0.0.0:0", "127.0.0.1"},
		{"[::1]:0", "[::1]"},
		{"[::]:0", "localhost"},
	} {
		t.Run(c.listen+"->"+c.host, func(t *testing.T) {
			h := startServer(t, c.listen)
			src := NewNVMLSource(newSink(), Settings{}, NVMLOptions{NVML: &fakeNVML{}})
			ups := []Upstream{
				{ID: "other", Target: "http://127.0.0.1:1"}, // nothing listens there
				{ID: "test", Target: fmt.Sprintf("http://%s:%d", c.host, h.port)},
			}
			servers, notes := src.discover(context.Background(), ups)
			if len(notes) != 0 {
				t.Errorf("notes: %v", notes)
			}
			if !servers[h.pid] {
				t.Fatalf("servers %v do not include the listening helper %d", servers, h.pid)
			}
			if servers[os.Getpid()] {
				t.Errorf("the test process %d counted as a server", os.Getpid())
			}
			if !src.proc.descendsFrom(h.childPID, servers) {
				t.Errorf("child %d not found to descend from the server %d", h.childPID, h.pid)
			}
			if src.proc.descendsFrom(os.Getpid(), servers) {
				t.Error("the test process descends from the server")
			}
		})
	}
}

// End to end with real processes and a fake NVML: the server and its child
// are borrowed, the test process is the owner.
func TestRealServerExcludedFromPressure(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	h := startServer(t, "127.0.0.1:0")
	nv := &fakeNVML{}
	me := uint32(os.Getpid())
	nv.set(0, fakeDevice{procs: []GPUProcess{
		{PID: uint32(h.pid), UsedMemoryBytes: 4 << 30},
		{PID: uint32(h.childPID), UsedMemoryBytes: 2 << 30},
		{PID: me, UsedMemoryBytes: 100 * mib},
	}})
	st := testSettings()
	st.Upstreams = []Upstream{{ID: "helper", Target: fmt.Sprintf("http://localhost:%d", h.port)}}
	src, sink := startSource(t, nv, nil, st, NVMLOptions{})
	s := sink.waitFor(t, "no pressure", pressureIs("nvml/gpu0", false))
	if r := s.pressure["nvml/gpu0"].Reason; !strings.Contains(r, fmt.Sprintf("pid %d", me)) {
		t.Errorf("reason %q does not list the test process as the owner's", r)
	}
	if got, ok := src.BorrowedMemory(0); !ok || got != 6<<30 {
		t.Errorf("BorrowedMemory(0) = %d, %t; want 6 GiB", got, ok)
	}
	nv.set(0, fakeDevice{procs: []GPUProcess{
		{PID: uint32(h.pid), UsedMemoryBytes: 4 << 30},
		{PID: me, UsedMemoryBytes: 300 * mib},
	}})
	s = sink.waitFor(t, "pressure", pressureIs("nvml/gpu0", true))
	if r := s.pressure["nvml/gpu0"].Reason; !strings.Contains(r, fmt.Sprintf("pid %d (", me)) || !strings.Contains(r, "300 MiB") {
		t.Errorf("reason %q", r)
	}
}
