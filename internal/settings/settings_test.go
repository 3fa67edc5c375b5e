package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/config"
)

const inlineToken = "kPqZ2t7nR4xM8vB1sL0wYcE6hJ3uA5dG9fTiO2rNqUx"

const base = `[server]
listen = "127.0.0.1:9811"

[[auth.token]]
name = "op"
scopes = ["read", "admin"]
value = "` + inlineToken + `"

[[upstream]]
id = "ollama"
listen = "127.0.0.1:11435"
target = "http://127.0.0.1:11434"
kind = "ollama"
`

func newStore(t *testing.T, mode os.FileMode) (*Store, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vacancyd.toml")
	if err := os.WriteFile(p, []byte(base), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return NewStore(p, config.Options{UnitFiles: []string{}}), p
}

func edit(t *testing.T, doc Document, f func(m map[string]any)) Document {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc.Settings, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Document{Revision: doc.Revision, Settings: b}
}

func TestGetNeverShowsSecrets(t *testing.T) {
	s, _ := newStore(t, 0o600)
	doc, err := s.Get()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(doc.Settings, []byte(inlineToken)) {
		t.Fatal("GET settings carries the inline token value")
	}
	if !bytes.Contains(doc.Settings, []byte(config.Redacted)) {
		t.Fatal("the inline value is not shown as redacted")
	}
	if doc.Revision != Revision([]byte(base)) {
		t.Fatal("revision is not the digest of the saved file")
	}
}

// A save keeps redacted secrets, changes what was changed, keeps the file's
// mode, and moves the revision.
func TestSaveRoundTrip(t *testing.T) {
	s, p := newStore(t, 0o640)
	doc, _ := s.Get()
	doc = edit(t, doc, func(m map[string]any) {
		m["upstream"].([]any)[0].(map[string]any)["management"] = "allow"
	})
	cfg, _, rev, err := s.Save(doc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Upstreams[0].Management != "allow" || cfg.Auth.Tokens[0].Secret.Reveal() != inlineToken {
		t.Fatalf("saved config: management=%q secret kept=%v", cfg.Upstreams[0].Management, cfg.Auth.Tokens[0].Secret.Reveal() == inlineToken)
	}
	data, _ := os.ReadFile(p)
	if rev != Revision(data) || rev == doc.Revision {
		t.Fatal("revision did not move to the new file's digest")
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode = %v, want 0640 kept", fi.Mode().Perm())
	}
	// What was written loads again, exactly as check-config would.
	if _, _, err := config.Load(p, config.Options{UnitFiles: []string{}}); err != nil {
		t.Fatalf("saved file does not load: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".vacancyd.toml.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestSaveRefusesStaleRevision(t *testing.T) {
	s, p := newStore(t, 0o600)
	doc, _ := s.Get()
	doc.Revision = "0000"
	if _, _, _, err := s.Save(doc); !errors.Is(err, ErrStale) {
		t.Fatalf("err = %v, want ErrStale", err)
	}
	if b, _ := os.ReadFile(p); string(b) != base {
		t.Fatal("a stale save changed the file")
	}
}

// An invalid document reports every problem and writes nothing.
func TestSaveRefusesInvalidWithEveryProblem(t *testing.T) {
	s, p := newStore(t, 0o600)
	doc, _ := s.Get()
	doc = edit(t, doc, func(m map[string]any) {
		m["server"].(map[string]any)["listen"] = "0.0.0.0:bad"
		u := m["upstream"].([]any)[0].(map[string]any)
		u["kind"] = "tgi"
		u["target"] = "http://user:pw@127.0.0.1:1"
	})
	_, ps, _, err := s.Save(doc)
	var inv *config.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v, want *config.InvalidError", err)
	}
	var lines []string
	for _, p := range ps.Errors() {
		lines = append(lines, p.Key+": "+p.Message)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"server.listen:", "upstream[0].kind:", "upstream[0].target:"} {
		if !strings.Contains(all, want) {
			t.Errorf("problem %q not reported; got:\n%s", want, all)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != base {
		t.Fatal("an invalid save changed the file")
	}
}

func TestSaveRefusesUnknownKeysAndForeignRedaction(t *testing.T) {
	s, _ := newStore(t, 0o600)
	doc, _ := s.Get()
	unknown := edit(t, doc, func(m map[string]any) { m["server"].(map[string]any)["listn"] = "x" })
	if _, _, _, err := s.Save(unknown); err == nil || !strings.Contains(err.Error(), "listn") {
		t.Fatalf("unknown key: %v", err)
	}
	// A redacted marker for a token that has no saved inline value cannot
	// stand for anything.
	foreign := edit(t, doc, func(m map[string]any) {
		a := m["auth"].(map[string]any)
		a["token"] = append(a["token"].([]any), map[string]any{"name": "new", "scopes": []any{"read"}, "value": config.Redacted})
	})
	if _, _, _, err := s.Save(foreign); err == nil || !strings.Contains(err.Error(), `token named "new"`) {
		t.Fatalf("foreign redaction: %v", err)
	}
}

func TestEmbeddedDefaultCannotBeSaved(t *testing.T) {
	s := NewStore("", config.Options{UnitFiles: []string{}})
	doc, err := s.Get()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Save(doc); !errors.Is(err, ErrNoFile) {
		t.Fatalf("err = %v, want ErrNoFile", err)
	}
}

// A write that fails leaves the old file in place.
func TestWriteAtomicFailureKeepsOldFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions; the failure cannot be provoked this way")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if err := WriteAtomic(p, []byte("new")); err == nil {
		t.Fatal("write into a read-only directory succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatal("old file changed")
	}
}
