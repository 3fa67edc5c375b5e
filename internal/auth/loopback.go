package auth

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// ForwardingHeaders are the headers a proxy adds. Any of them on a loopback
// request means it was relayed, so loopback trust does not apply.
var ForwardingHeaders = []string{
	"Forwarded",
	"X-Forwarded-For",
	"X-Forwarded-Host",
	"X-Forwarded-Proto",
	"X-Real-IP",
	"Via",
}

// IsLoopbackPeer reports whether a connection's remote address is on the
// loopback interface: 127.0.0.0/8 or ::1, IPv4-mapped forms included.
func IsLoopbackPeer(a netip.Addr) bool {
	return a.IsValid() && a.Zone() == "" && a.Unmap().IsLoopback()
}

// Disqualifier returns why a request from a loopback peer is not direct, or
// "" when it is. host is the request's Host, localPort the port it arrived on
// (0 when unknown, which only an absent Host passes). The reasons are:
// "forwarding header NAME", "host", "sec-fetch-site" and "origin".
func Disqualifier(h http.Header, host string, localPort uint16) string {
	if name, ok := ForwardingHeader(h); ok {
		return "forwarding header " + name
	}
	if !HostIsLocal(host, localPort) {
		return "host"
	}
	for key, values := range h {
		switch {
		case strings.EqualFold(key, "Sec-Fetch-Site"):
			for _, v := range values {
				if strings.EqualFold(strings.TrimSpace(v), "cross-site") {
					return "sec-fetch-site"
				}
			}
		case strings.EqualFold(key, "Origin"):
			for _, v := range values {
				if !OriginIsLocal(v) {
					return "origin"
				}
			}
		}
	}
	return ""
}

// ForwardingHeader returns the first of ForwardingHeaders present in h (in any
// letter case, with any value, even empty).
func ForwardingHeader(h http.Header) (string, bool) {
	for key := range h {
		for _, name := range ForwardingHeaders {
			if strings.EqualFold(key, name) {
				return name, true
			}
		}
	}
	return "", false
}

// HostIsLocal reports whether a Host header value names this machine's
// loopback listener: empty, or a loopback IP literal (IPv6 in brackets) or
// "localhost" (any letter case) with port, the port the request arrived on. A
// Host without a port means port 80. Any loopback literal matches a listener
// on any loopback address: only the name and the port are judged.
func HostIsLocal(host string, port uint16) bool {
	if host == "" {
		return true
	}
	name, p, ok := splitAuthority(host)
	if !ok || !isLoopbackName(name) {
		return false
	}
	if p == "" {
		return port == 80
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n != 0 && uint16(n) == port
}

// OriginIsLocal reports whether an Origin header value is a local origin:
// http or https on a loopback address or localhost with any port, or exactly
// tauri://localhost or http://tauri.localhost (a Tauri desktop app's own
// origin). "null" and anything unparseable are not local.
func OriginIsLocal(origin string) bool {
	if origin == "tauri://localhost" || origin == "http://tauri.localhost" {
		return true
	}
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok || (!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https")) {
		return false
	}
	name, p, ok := splitAuthority(rest)
	if !ok || !isLoopbackName(name) {
		return false
	}
	if p == "" {
		return true
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n != 0
}

// splitAuthority splits "name[:port]" or "[v6][:port]" strictly: no userinfo,
// path, query or fragment; a port, when present, is 1 to 5 digits; a bracketed
// name must be an IPv6 literal; an unbracketed one holds no colon.
func splitAuthority(s string) (name, port string, ok bool) {
	if s == "" || strings.ContainsAny(s, "/?#@ \t\r\n\\%") {
		return "", "", false
	}
	rest := ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false
		}
		name, rest = s[1:end], s[end+1:]
		a, err := netip.ParseAddr(name)
		if err != nil || !a.Is6() {
			return "", "", false
		}
	} else {
		i := strings.IndexByte(s, ':')
		if i < 0 {
			return s, "", true
		}
		name, rest = s[:i], s[i:]
		if name == "" {
			return "", "", false
		}
	}
	if rest == "" {
		return name, "", true
	}
	if rest[0] != ':' {
		return "", "", false
	}
	port = rest[1:]
	if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", "", false
	}
	return name, port, true
}

// isLoopbackName reports whether a host name from a Host or Origin header
// names loopback: "localhost" in any case or a loopback IP literal.
func isLoopbackName(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(name)
	return err == nil && IsLoopbackPeer(a)
}
