package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

//go:embed default.toml
var embeddedDefault []byte

// EmbeddedDefault returns the TOML text of the configuration vacancyd runs when
// no file exists.
func EmbeddedDefault() []byte { return bytes.Clone(embeddedDefault) }

// Options are the environment a configuration is loaded in. The zero value uses
// the process environment and the platform's systemd unit paths.
type Options struct {
	// LookupEnv reads value_env variables; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// UnitFiles are systemd unit files to check the admin socket path against;
	// nil means the installed unit, else the packaged one. Empty (non-nil) skips.
	UnitFiles []string
	// GOOS selects platform rules; empty means runtime.GOOS.
	GOOS string
}

func (o Options) lookupEnv(k string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv(k)
	}
	return os.LookupEnv(k)
}

func (o Options) goos() string {
	if o.GOOS != "" {
		return o.GOOS
	}
	return runtime.GOOS
}

// Load reads, decodes and validates the file at path. It returns the config
// with its warnings; the error is an *InvalidError listing every error, or an
// I/O error when the file cannot be read.
func Load(path string, opts Options) (*Config, Problems, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, abs, opts)
}

// Parse decodes and validates data as if read from path (which locates relative
// secret paths; empty for the embedded default, which then resolves from the
// working directory).
func Parse(data []byte, path string, opts Options) (*Config, Problems, error) {
	cfg := Defaults()
	cfg.Path = path
	if path != "" {
		cfg.Dir = filepath.Dir(path)
	} else if wd, err := os.Getwd(); err == nil {
		cfg.Dir = wd
	}
	if ps := decodeStrict(data, &cfg); len(ps) > 0 {
		return nil, ps, ps.Err()
	}
	cfg.applyElementDefaults()
	ps := cfg.loadSecrets(opts)
	ps = append(ps, cfg.Validate(opts)...)
	if err := ps.Err(); err != nil {
		return nil, ps, err
	}
	return &cfg, ps.Warnings(), nil
}

// decodeStrict decodes TOML into cfg, refusing unknown keys. Each problem names
// the key and the line.
func decodeStrict(data []byte, cfg *Config) Problems {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(cfg)
	if err == nil {
		return nil
	}
	var ps Problems
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		for i := range strict.Errors {
			e := &strict.Errors[i]
			row, _ := e.Position()
			ps.errorf(keyPath(data, e.Key(), row), "unknown key (line %d)", row)
		}
	case errors.As(err, &de):
		row, _ := de.Position()
		key := "config"
		if len(de.Key()) > 0 {
			key = keyPath(data, de.Key(), row)
		}
		ps.errorf(key, "line %d: %s", row, de.Error())
	default:
		ps.errorf("config", "%s", cleanDecodeError(err))
	}
	return ps
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

var tomlTypeErr = regexp.MustCompile(`toml: cannot (decode|store) .*`)

func cleanDecodeError(err error) string {
	msg := err.Error()
	if m := tomlTypeErr.FindString(msg); m != "" {
		return m
	}
	return msg
}

// keyPath renders a decoder key as the key path Validate uses, indexing array
// tables by counting their headers above the line (upstream[1].tagret).
func keyPath(data []byte, key []string, row int) string {
	lines := strings.Split(string(data), "\n")
	if row > len(lines) {
		row = len(lines)
	}
	var parts []string
	for i, k := range key {
		if !bareKey.MatchString(k) {
			k = strconv.Quote(k)
		}
		prefix := strings.Join(key[:i+1], ".")
		n := countArrayHeaders(lines[:row], prefix)
		if n > 0 && i < len(key)-1 {
			parts = append(parts, k+"["+strconv.Itoa(n-1)+"]")
		} else {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, ".")
}

func countArrayHeaders(lines []string, name string) int {
	n := 0
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "[[") {
			continue
		}
		end := strings.Index(l, "]]")
		if end < 0 {
			continue
		}
		if strings.ReplaceAll(strings.TrimSpace(l[2:end]), " ", "") == name {
			n++
		}
	}
	return n
}

// loadSecrets reads every token and credential secret from its one source.
func (c *Config) loadSecrets(opts Options) Problems {
	var ps Problems
	for i := range c.Auth.Tokens {
		t := &c.Auth.Tokens[i]
		key := fmt.Sprintf("auth.token[%d]", i)
		n := count(!t.Value.IsZero(), t.ValueEnv != "", t.ValueFile != "")
		if n != 1 {
			ps.errorf(key, "set exactly one of value, value_env or value_file (found %d)", n)
			continue
		}
		switch {
		case !t.Value.IsZero():
			t.Secret = t.Value
			ps.warnf(key+".value", "inline token values end up in copies and backups of this file; prefer value_file or value_env")
		case t.ValueEnv != "":
			t.Secret = c.secretFromEnv(&ps, key+".value_env", t.ValueEnv, opts)
		default:
			t.FilePath = c.Resolve(t.ValueFile)
			t.Secret = c.secretFromFile(&ps, key+".value_file", t.FilePath, opts)
		}
	}
	for i := range c.Upstreams {
		cr := c.Upstreams[i].Credential
		if cr == nil {
			continue
		}
		key := fmt.Sprintf("upstream[%d].credential", i)
		n := count(cr.ValueEnv != "", cr.ValueFile != "")
		if n != 1 {
			ps.errorf(key, "set exactly one of value_file or value_env (found %d; there is no inline form)", n)
			continue
		}
		if cr.ValueEnv != "" {
			cr.Secret = c.secretFromEnv(&ps, key+".value_env", cr.ValueEnv, opts)
		} else {
			cr.FilePath = c.Resolve(cr.ValueFile)
			cr.Secret = c.secretFromFile(&ps, key+".value_file", cr.FilePath, opts)
		}
	}
	return ps
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// Resolve returns p resolved against the config file's directory.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

func (c *Config) secretFromEnv(ps *Problems, key, name string, opts Options) Secret {
	v, ok := opts.lookupEnv(name)
	if !ok {
		ps.errorf(key, "environment variable %q is not set", name)
		return Secret{}
	}
	v = strings.TrimRight(v, " \t\r\n")
	if v == "" {
		ps.errorf(key, "environment variable %q is empty", name)
	}
	return NewSecret(v)
}

func (c *Config) secretFromFile(ps *Problems, key, path string, opts Options) Secret {
	v, err := ReadSecretFile(path)
	if err != nil {
		ps.errorf(key, "%v", err)
		return Secret{}
	}
	if opts.goos() != "windows" {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o044 != 0 {
			ps.warnf(key, "%s is readable by group or others (mode %04o); chmod 600 it", path, fi.Mode().Perm())
		}
	}
	return v
}

// ReadSecretFile reads a secret file, trimming trailing whitespace. An
// unreadable or empty file is an error that names the path.
func ReadSecretFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Secret{}, fmt.Errorf("cannot read secret file %s: %v", path, err)
	}
	v := strings.TrimRight(string(b), " \t\r\n")
	if v == "" {
		return Secret{}, fmt.Errorf("secret file %s is empty", path)
	}
	return NewSecret(v), nil
}
