package auth

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestParseCredential(t *testing.T) {
	long := strings.Repeat("k", MaxCredentialLength+1)
	max := strings.Repeat("k", MaxCredentialLength)
	for _, c := range []struct {
		name   string
		h      http.Header
		want   string
		status CredentialStatus
	}{
		{"none", http.Header{}, "", CredentialNone},
		{"unrelated headers", http.Header{"Cookie": {"a=b"}}, "", CredentialNone},
		{"bearer", http.Header{"Authorization": {"Bearer abc"}}, "abc", CredentialOK},
		{"bearer lower case", http.Header{"Authorization": {"bearer abc"}}, "abc", CredentialOK},
		{"bearer upper case", http.Header{"Authorization": {"BEARER abc"}}, "abc", CredentialOK},
		{"bearer extra spaces", http.Header{"Authorization": {"Bearer    abc  "}}, "abc", CredentialOK},
		{"bearer tab", http.Header{"Authorization": {"Bearer\tabc"}}, "abc", CredentialOK},
		{"x-api-key", http.Header{"X-Api-Key": {"abc"}}, "abc", CredentialOK},
		{"non-canonical key", http.Header{"x-api-key": {"abc"}}, "abc", CredentialOK},
		{"both agree", http.Header{"Authorization": {"Bearer abc"}, "X-Api-Key": {"abc"}}, "abc", CredentialOK},
		{"x-api-key wins over authorization", http.Header{"Authorization": {"Bearer abc"}, "X-Api-Key": {"xyz"}}, "xyz", CredentialOK},
		{"x-api-key beside a basic authorization", http.Header{"Authorization": {"Basic YTpi"}, "X-Api-Key": {"xyz"}}, "xyz", CredentialOK},
		{"two authorizations disagree", http.Header{"Authorization": {"Bearer abc", "Bearer xyz"}}, "", CredentialMalformed},
		{"two authorizations agree", http.Header{"Authorization": {"Bearer abc", "bearer abc"}}, "abc", CredentialOK},
		{"two api keys disagree", http.Header{"X-Api-Key": {"abc"}, "x-api-key": {"xyz"}}, "", CredentialMalformed},
		{"malformed then good", http.Header{"X-Api-Key": {"a b", "abc"}}, "", CredentialMalformed},
		{"basic scheme", http.Header{"Authorization": {"Basic YTpi"}}, "", CredentialMalformed},
		{"bearer alone", http.Header{"Authorization": {"Bearer"}}, "", CredentialMalformed},
		{"bearer no space", http.Header{"Authorization": {"Bearerabc"}}, "", CredentialMalformed},
		{"bearer empty token", http.Header{"Authorization": {"Bearer   "}}, "", CredentialMalformed},
		{"inner space", http.Header{"Authorization": {"Bearer a b"}}, "", CredentialMalformed},
		{"empty api key", http.Header{"X-Api-Key": {""}}, "", CredentialMalformed},
		{"512 bytes", http.Header{"X-Api-Key": {max}}, max, CredentialOK},
		{"513 bytes api key", http.Header{"X-Api-Key": {long}}, "", CredentialTooLong},
		{"513 bytes bearer", http.Header{"Authorization": {"Bearer " + long}}, "", CredentialTooLong},
		{"long other scheme", http.Header{"Authorization": {"Negotiate " + long}}, "", CredentialTooLong},
		{"too long x-api-key beside a good bearer", http.Header{"Authorization": {"Bearer abc"}, "X-Api-Key": {long}}, "", CredentialTooLong},
		{"too long authorization is not examined beside x-api-key", http.Header{"Authorization": {"Bearer " + long}, "X-Api-Key": {"abc"}}, "abc", CredentialOK},
		{"too long among agreeing values", http.Header{"X-Api-Key": {"abc", long}}, "", CredentialTooLong},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, st := ParseCredential(c.h)
			if got != c.want || st != c.status {
				t.Errorf("ParseCredential = %q, %v; want %q, %v", got, st, c.want, c.status)
			}
		})
	}
}

func TestStripCredentials(t *testing.T) {
	h := http.Header{
		"Authorization": {"Bearer a"},
		"X-Api-Key":     {"b"},
		"x-api-key":     {"c"},
		"AUTHORIZATION": {"d"},
		"Content-Type":  {"application/json"},
	}
	StripCredentials(h)
	if len(h) != 1 || h.Get("Content-Type") == "" {
		t.Errorf("after StripCredentials: %v", h)
	}
	if _, st := ParseCredential(h); st != CredentialNone {
		t.Errorf("a credential survived stripping: %v", st)
	}
}

func TestHostIsLocal(t *testing.T) {
	for _, c := range []struct {
		host string
		port uint16
		want bool
	}{
		{"", 9811, true},
		{"127.0.0.1:9811", 9811, true},
		{"127.255.0.9:9811", 9811, true},
		{"localhost:9811", 9811, true},
		{"LOCALHOST:9811", 9811, true},
		{"[::1]:9811", 9811, true},
		{"[::ffff:127.0.0.1]:9811", 9811, true},
		{"localhost", 80, true},
		{"127.0.0.1", 80, true},
		{"localhost", 9811, false},
		{"127.0.0.1:9812", 9811, false},
		{"127.0.0.1:9811", 0, false},
		{"localhost:", 9811, false},
		{"localhost.:9811", 9811, false},
		{"localhost.evil.example:9811", 9811, false},
		{"evil.example:9811", 9811, false},
		{"host.docker.internal:9811", 9811, false},
		{"0.0.0.0:9811", 9811, false},
		{"192.0.2.10:9811", 9811, false},
		{"::1:9811", 9811, false},
		{"[127.0.0.1]:9811", 9811, false},
		{"[::1%lo]:9811", 9811, false},
		{"user@localhost:9811", 9811, false},
		{"localhost:9811/x", 9811, false},
		{"localhost:+9811", 9811, false},
		{"localhost:109811", 9811, false},
		{"127.1:9811", 9811, false},
	} {
		if got := HostIsLocal(c.host, c.port); got != c.want {
			t.Errorf("HostIsLocal(%q, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
}

func TestOriginIsLocal(t *testing.T) {
	for _, c := range []struct {
		origin string
		want   bool
	}{
		{"http://127.0.0.1", true},
		{"http://127.0.0.1:3000", true},
		{"https://127.1.2.3:8443", true},
		{"http://localhost:5173", true},
		{"HTTP://LOCALHOST", true},
		{"http://[::1]:8080", true},
		{"tauri://localhost", true},
		{"http://tauri.localhost", true},
		{"null", false},
		{"", false},
		{"https://tauri.localhost", false},
		{"tauri://localhost:1", false},
		{"tauri://evil.example", false},
		{"ws://localhost", false},
		{"file://", false},
		{"http://evil.example", false},
		{"http://localhost.evil.example", false},
		{"http://127.0.0.1.nip.io", false},
		{"http://0.0.0.0", false},
		{"http://localhost/", false},
		{"http://user@localhost", false},
		{"http://localhost:0", false},
		{"http://localhost:99999", false},
		{"http://[::1]x", false},
		{"localhost", false},
	} {
		if got := OriginIsLocal(c.origin); got != c.want {
			t.Errorf("OriginIsLocal(%q) = %v, want %v", c.origin, got, c.want)
		}
	}
}

func TestDisqualifier(t *testing.T) {
	for _, c := range []struct {
		name string
		h    http.Header
		host string
		want string
	}{
		{"direct", http.Header{}, "127.0.0.1:9811", ""},
		{"forwarded", http.Header{"Forwarded": {"for=x"}}, "127.0.0.1:9811", "forwarding header Forwarded"},
		{"x-real-ip canonical", http.Header{"X-Real-Ip": {"1.2.3.4"}}, "", "forwarding header X-Real-IP"},
		{"via lower", http.Header{"via": {""}}, "", "forwarding header Via"},
		{"host", http.Header{}, "evil.example:9811", "host"},
		{"sec-fetch-site", http.Header{"Sec-Fetch-Site": {"cross-site"}}, "", "sec-fetch-site"},
		{"same-site fine", http.Header{"Sec-Fetch-Site": {"same-site"}}, "", ""},
		{"origin", http.Header{"Origin": {"null"}}, "", "origin"},
		{"second origin value", http.Header{"Origin": {"http://localhost", "https://evil.example"}}, "", "origin"},
		{"local origin", http.Header{"Origin": {"http://localhost:1"}}, "", ""},
	} {
		if got := Disqualifier(c.h, c.host, 9811); got != c.want {
			t.Errorf("%s: Disqualifier = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestIsLoopbackPeer(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.1": false, "::": false, "0.0.0.0": false, "::ffff:10.0.0.1": false, "fe80::1": false,
	} {
		if got := IsLoopbackPeer(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsLoopbackPeer(%s) = %v", s, got)
		}
	}
	if IsLoopbackPeer(netip.Addr{}) {
		t.Error("the zero address is not loopback")
	}
}

func TestScopeNames(t *testing.T) {
	for _, s := range allScopes {
		got, err := ParseScope(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseScope("write"); err == nil {
		t.Error("ParseScope accepted an unknown scope")
	}
	if Read.String() != "read" || Borrow.String() != "borrow" || Admin.String() != "admin" {
		t.Error("scope names differ from the configuration's")
	}
}
