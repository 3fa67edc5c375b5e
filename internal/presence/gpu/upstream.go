package gpu

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Upstream is an inference server whose processes use the GPU on the
// borrowers' behalf: never the owner's use.
type Upstream struct {
	ID string
	// Target is the server's URL (config upstream.target).
	Target string
}

// endpoint is where a target's server listens, when it is on this machine.
type endpoint struct {
	addrs []netip.Addr // the target's addresses (a name may have several)
	port  uint16
}

// resolveTimeout bounds looking up a target's host name.
const resolveTimeout = 2 * time.Second

// localEndpoint parses target and resolves its host. ok is false for a
// server on another machine: none of its processes can be on these GPUs.
func localEndpoint(ctx context.Context, target string) (ep endpoint, ok bool, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return endpoint{}, false, fmt.Errorf("target %q: %w", target, err)
	}
	host, portStr := u.Hostname(), u.Port()
	if portStr == "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "wss":
			portStr = "443"
		default:
			portStr = "80"
		}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return endpoint{}, false, fmt.Errorf("target %q: bad port %q", target, portStr)
	}
	ep.port = uint16(port)
	switch {
	case host == "" || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost"):
		ep.addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			ep.addrs = []netip.Addr{a.Unmap().WithZone("")}
		} else {
			ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
			defer cancel()
			as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return endpoint{}, false, fmt.Errorf("target %q: %w", target, err)
			}
			for _, a := range as {
				ep.addrs = append(ep.addrs, a.Unmap().WithZone(""))
			}
		}
	}
	local, err := localAddrs()
	if err != nil {
		return endpoint{}, false, err
	}
	for _, a := range ep.addrs {
		if a.IsLoopback() || a.IsUnspecified() || local[a] {
			return ep, true, nil
		}
	}
	return endpoint{}, false, nil
}

// localAddrs is the set of this machine's interface addresses.
func localAddrs() (map[netip.Addr]bool, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	m := map[netip.Addr]bool{}
	for _, ia := range ifAddrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil {
			m[p.Addr().Unmap().WithZone("")] = true
		}
	}
	return m, nil
}

// serves reports whether a LISTEN socket on ls accepts connections made to ep.
func (ep endpoint) serves(ls netip.AddrPort) bool {
	if ls.Port() != ep.port {
		return false
	}
	a := ls.Addr().Unmap().WithZone("")
	if a.IsUnspecified() {
		return true
	}
	for _, t := range ep.addrs {
		if t == a {
			return true
		}
	}
	return false
}
