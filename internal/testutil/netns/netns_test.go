//go:build linux

package netns

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// TestPeerIsNotLoopback proves the namespace's connections reach the host from
// the namespace address, which is what the auth tests rely on.
func TestPeerIsNotLoopback(t *testing.T) {
	ns := New(t)
	ln, err := net.Listen("tcp", ns.HostAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		got <- c.RemoteAddr().String()
		_, _ = bufio.NewReader(c).ReadString('\n')
	}()
	out, err := ns.Command("bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(ln.Addr().String(), ":", "/", 1)+"; echo hi >&3").CombinedOutput()
	if err != nil {
		t.Fatalf("connect from namespace: %v: %s", err, out)
	}
	peer := <-got
	host, _, _ := net.SplitHostPort(peer)
	if host != ns.PeerAddr {
		t.Fatalf("peer = %s, want %s", peer, ns.PeerAddr)
	}
}
