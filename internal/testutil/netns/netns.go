//go:build linux

package netns

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// NS is one namespace and its veth pair.
type NS struct {
	Name string
	// HostAddr is the host side's address (listen here to be reachable).
	HostAddr string
	// PeerAddr is the namespace side's address (what the daemon sees).
	PeerAddr string
}

var seq atomic.Uint32

// New creates a namespace for the test and removes it at cleanup. Each call
// uses its own /30 subnet of 10.213.0.0/16, chosen from the pid and a counter
// so that parallel test binaries do not collide.
func New(t testing.TB) *NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns: network namespaces need root; skipping the real LAN caller test")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns: iproute2's ip command is not installed; skipping the real LAN caller test")
	}
	n := (uint32(os.Getpid())*7 + seq.Add(1)) % 16000
	name := fmt.Sprintf("vacancyd-t%d", n)
	host := fmt.Sprintf("vh%d", n)
	peer := fmt.Sprintf("vp%d", n)
	base := n * 4
	ns := &NS{
		Name:     name,
		HostAddr: fmt.Sprintf("10.213.%d.%d", base/256, base%256+1),
		PeerAddr: fmt.Sprintf("10.213.%d.%d", base/256, base%256+2),
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("netns: cannot create a network namespace here (%v: %s); skipping the real LAN caller test", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", name).Run()
	})
	steps := [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", name},
		{"ip", "addr", "add", ns.HostAddr + "/30", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "netns", "exec", name, "ip", "addr", "add", ns.PeerAddr + "/30", "dev", peer},
		{"ip", "netns", "exec", name, "ip", "link", "set", peer, "up"},
		{"ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Skipf("netns: %s failed (%v: %s); skipping the real LAN caller test", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return ns
}

// Command returns a command that runs inside the namespace.
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}
