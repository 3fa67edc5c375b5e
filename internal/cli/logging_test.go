package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// --log-level filters below the chosen level; --log-format json writes one
// JSON object per line.
func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, _, err := newLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "key", "server.listen")
	out := strings.TrimSpace(buf.String())
	if strings.Contains(out, "hidden") {
		t.Fatalf("info line logged at level warn: %s", out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec["msg"] != "shown" || rec["key"] != "server.listen" {
		t.Fatalf("want one JSON WARN line, got %q (%v)", out, err)
	}
	for _, bad := range [][2]string{{"verbose", "text"}, {"info", "xml"}, {"INFO+2", "text"}} {
		if _, _, err := newLogger(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("newLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// A generated token is 43 base64url characters and never repeats.
func TestNewToken(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 43 || strings.ContainsAny(a, "+/=") || a == b {
		t.Fatalf("tokens %q, %q: want two different 43-character base64url strings", a, b)
	}
}
