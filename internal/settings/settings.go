// Package settings is the settings contract: the saved configuration file as
// a JSON document with a revision, and saving a changed document back. A save
// names the revision it was based on (a stale one is refused), is validated
// exactly like check-config (every problem reported, nothing written), and
// replaces the file atomically, so the file on disk is always the old or the
// new configuration, never a mix.
//
// Secrets never leave in a document: inline token values come back as the
// redaction marker, and a marker sent back means "keep the current value".
// Comments in the file are not preserved by a save: the file is rewritten
// from the document.
package settings

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/vacancyd/vacancyd/internal/config"
)

// Revision identifies the content of a configuration file.
func Revision(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// Document is GET /admin/settings' answer and POST's request.
type Document struct {
	Revision string          `json:"revision"`
	Settings json.RawMessage `json:"settings"`
}

// ErrStale is a save based on a revision that is no longer the saved one.
var ErrStale = errors.New("settings: the revision is stale; reload the settings and reapply the change")

// ErrNoFile is a save while running the embedded default.
var ErrNoFile = errors.New("settings: vacancyd runs its embedded default; start it with --config FILE to save settings")

// Store reads and writes one configuration file. Saves are serialised.
type Store struct {
	path string
	opts config.Options
	mu   sync.Mutex
}

// NewStore returns a store for path (empty for the embedded default).
func NewStore(path string, opts config.Options) *Store { return &Store{path: path, opts: opts} }

// Path returns the file the store manages.
func (s *Store) Path() string { return s.path }

// Load reads and validates the saved file. It returns the config, its
// warnings and its revision.
func (s *Store) Load() (*config.Config, config.Problems, string, error) {
	data := config.EmbeddedDefault()
	if s.path != "" {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return nil, nil, "", fmt.Errorf("read config: %w", err)
		}
		data = b
	}
	cfg, ps, err := config.Parse(data, s.abs(), s.opts)
	return cfg, ps, Revision(data), err
}

func (s *Store) abs() string {
	if s.path == "" {
		return ""
	}
	if a, err := filepath.Abs(s.path); err == nil {
		return a
	}
	return s.path
}

// Get returns the saved settings as a document.
func (s *Store) Get() (Document, error) {
	cfg, _, rev, err := s.Load()
	if err != nil {
		return Document{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return Document{}, err
	}
	return Document{Revision: rev, Settings: bytes.TrimSpace(buf.Bytes())}, nil
}

// Save validates doc against the saved file and, when its revision is
// current and it is valid, writes it atomically. It returns the new config
// and revision. Errors: ErrStale, ErrNoFile, *config.InvalidError (every
// problem), or an I/O error; on any error nothing has changed on disk.
func (s *Store) Save(doc Document) (*config.Config, config.Problems, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		return nil, nil, "", ErrNoFile
	}
	cur, _, rev, err := s.Load()
	if err != nil {
		return nil, nil, "", err
	}
	if doc.Revision != rev {
		return nil, nil, "", ErrStale
	}
	data, ps := Encode(doc.Settings, cur)
	if err := ps.Err(); err != nil {
		return nil, ps, "", err
	}
	cfg, ps, err := config.Parse(data, s.abs(), s.opts)
	if err != nil {
		return nil, ps, "", err
	}
	if err := WriteAtomic(s.path, data); err != nil {
		return nil, nil, "", err
	}
	return cfg, ps, Revision(data), nil
}

// Encode turns a settings document into TOML, putting back the inline
// secrets of cur where the document carries the redaction marker. Decoding
// problems are reported at key "settings".
func Encode(settings json.RawMessage, cur *config.Config) ([]byte, config.Problems) {
	var ps config.Problems
	bad := func(format string, args ...any) ([]byte, config.Problems) {
		return nil, append(ps, config.Problem{Key: "settings", Message: fmt.Sprintf(format, args...)})
	}
	// Strict decode into the config types first: unknown keys and wrong
	// types are reported here, before anything is rewritten.
	var typed config.Config
	dec := json.NewDecoder(bytes.NewReader(settings))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&typed); err != nil {
		return bad("%v", err)
	}
	var doc map[string]any
	dec = json.NewDecoder(bytes.NewReader(settings))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return bad("must be a JSON object")
	}
	if err := restoreSecrets(doc, cur); err != nil {
		return bad("%v", err)
	}
	out, err := toml.Marshal(normalizeNumbers(doc))
	if err != nil {
		return bad("cannot encode as TOML: %v", err)
	}
	return append([]byte("# Written by vacancyd (settings save). Comments are not preserved.\n"), out...), nil
}

// restoreSecrets replaces redaction markers in auth.token[].value with the
// current inline value of the token of the same name.
func restoreSecrets(doc map[string]any, cur *config.Config) error {
	a, _ := doc["auth"].(map[string]any)
	tokens, _ := a["token"].([]any)
	for i, t := range tokens {
		tm, ok := t.(map[string]any)
		if !ok || tm["value"] != config.Redacted {
			continue
		}
		name, _ := tm["name"].(string)
		found := false
		for _, ct := range cur.Auth.Tokens {
			if ct.Name == name && !ct.Value.IsZero() {
				tm["value"] = ct.Value.Reveal()
				found = true
			}
		}
		if !found {
			return fmt.Errorf("auth.token[%d].value: the redacted value stands for an unchanged secret, but the saved settings have no inline value for a token named %q", i, name)
		}
	}
	return nil
}

// normalizeNumbers turns JSON numbers into int64 or float64 for TOML.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// WriteAtomic replaces path with data: a temporary file in the same
// directory, written and fsynced, given the old file's mode and owner, renamed
// over path, and the directory fsynced. A failure leaves path untouched.
func WriteAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	mode := os.FileMode(0o600)
	uid, gid := -1, -1
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		uid, gid = fileOwner(fi)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && uid >= 0 {
		err = chown(f, uid, gid)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return syncDir(dir)
}

// Result is the answer to a successful save or reload.
type Result struct {
	Revision string `json:"revision"`
	// Applied names what took effect at once.
	Applied []string `json:"applied"`
	// RestartRequired names what takes effect at the next start.
	RestartRequired []string `json:"restart_required"`
	Warnings        []string `json:"warnings,omitempty"`
}
