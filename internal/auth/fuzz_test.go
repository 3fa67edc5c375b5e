package auth

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseCredential: parsing any Authorization and X-Api-Key values never
// panics, and an accepted credential is non-empty, has no whitespace and is at
// most 512 bytes.
func FuzzParseCredential(f *testing.F) {
	f.Add("Bearer abc", "")
	f.Add("", "abc")
	f.Add("bearer "+strings.Repeat("x", 513), "")
	f.Add("Basic Zm9vOmJhcg==", "abc")
	f.Add("Bearer\t\tabc ", "abc")
	f.Add("Bearer ", " ")
	f.Fuzz(func(t *testing.T, authorization, key string) {
		h := http.Header{}
		if authorization != "" {
			h.Set("Authorization", authorization)
		}
		if key != "" {
			h.Set("X-Api-Key", key)
		}
		v, st := ParseCredential(h)
		if st != CredentialOK {
			if v != "" {
				t.Fatalf("status %v with a value", st)
			}
			return
		}
		if v == "" || len(v) > MaxCredentialLength || strings.ContainsAny(v, " \t\r\n") {
			t.Fatalf("accepted credential of %d bytes: %q", len(v), v)
		}
		if !strings.Contains(authorization, v) && !strings.Contains(key, v) {
			t.Fatalf("accepted %q, which neither header holds", v)
		}
	})
}

// FuzzHostIsLocal: a Host judged local is empty or names loopback with
// exactly the listener's port (80 when it gives none), and is judged
// differently on another port.
func FuzzHostIsLocal(f *testing.F) {
	f.Add("127.0.0.1:9811", uint16(9811))
	f.Add("[::1]:9811", uint16(9811))
	f.Add("localhost", uint16(80))
	f.Add("evil.example:9811", uint16(9811))
	f.Add("[::1%25lo]:1", uint16(1))
	f.Add("localhost:09811", uint16(9811))
	f.Fuzz(func(t *testing.T, host string, port uint16) {
		if !HostIsLocal(host, port) || host == "" {
			return
		}
		name, p, err := net.SplitHostPort(host)
		if err != nil {
			name, p = host, "80"
		}
		n, err := strconv.Atoi(p)
		if err != nil || n != int(port) {
			t.Fatalf("HostIsLocal(%q, %d) accepted another port %q", host, port, p)
		}
		if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
			name = name[1 : len(name)-1]
		}
		if !strings.EqualFold(name, "localhost") && !isLoopbackName(name) {
			t.Fatalf("HostIsLocal(%q) accepted a non-loopback name %q", host, name)
		}
		if HostIsLocal(host, port+1) {
			t.Fatalf("HostIsLocal(%q) accepted two ports", host)
		}
	})
}

// FuzzOriginIsLocal: "null" is never local, and a local origin is one of the
// Tauri origins or http(s) on a loopback name, with no path.
func FuzzOriginIsLocal(f *testing.F) {
	for _, s := range []string{"null", "http://localhost:3000", "tauri://localhost", "http://tauri.localhost", "https://[::1]", "http://evil.example", "http://127.0.0.1.evil", "http://localhost@evil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		if !OriginIsLocal(origin) {
			return
		}
		if strings.EqualFold(strings.TrimSpace(origin), "null") {
			t.Fatal("Origin null judged local")
		}
		if origin == "tauri://localhost" || origin == "http://tauri.localhost" {
			return
		}
		scheme, rest, _ := strings.Cut(origin, "://")
		if !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
			t.Fatalf("local origin %q has scheme %q", origin, scheme)
		}
		if strings.ContainsAny(rest, "/@?#") {
			t.Fatalf("local origin %q has more than scheme://host:port", origin)
		}
		host := rest
		if h, _, err := net.SplitHostPort(rest); err == nil {
			host = h
		}
		if !isLoopbackName(strings.Trim(host, "[]")) {
			t.Fatalf("local origin %q names %q", origin, host)
		}
	})
}

// FuzzDisqualifier: whatever else a loopback request carries, a forwarding
// header, Sec-Fetch-Site: cross-site or Origin: null always disqualifies it,
// and judging never panics.
func FuzzDisqualifier(f *testing.F) {
	f.Add("X-Forwarded-For", "1.2.3.4", "127.0.0.1:9811", "", "")
	f.Add("Accept", "*/*", "localhost:9811", "http://localhost", "same-origin")
	f.Add("forwarded", "", "", "null", "")
	f.Add("Via", "1.1 x", "[::1]:9811", "tauri://localhost", "cross-site")
	f.Fuzz(func(t *testing.T, name, value, host, origin, fetchSite string) {
		h := http.Header{}
		if name != "" {
			h[name] = []string{value}
		}
		if origin != "" {
			h["Origin"] = []string{origin}
		}
		if fetchSite != "" {
			h["Sec-Fetch-Site"] = []string{fetchSite}
		}
		reason := Disqualifier(h, host, 9811)
		for _, fh := range ForwardingHeaders {
			if strings.EqualFold(name, fh) && reason == "" {
				t.Fatalf("forwarding header %q did not disqualify", name)
			}
		}
		if origin == "null" && reason == "" {
			t.Fatal("Origin: null did not disqualify")
		}
		if strings.EqualFold(fetchSite, "cross-site") && reason == "" {
			t.Fatal("Sec-Fetch-Site: cross-site did not disqualify")
		}
		if !HostIsLocal(host, 9811) && reason == "" {
			t.Fatalf("Host %q did not disqualify", host)
		}
	})
}
