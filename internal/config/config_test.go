package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testEnv is the environment the testdata files are loaded in.
var testEnv = map[string]string{
	"VACANCYD_TEST_TOKEN":    "env-token-0123456789abcdefghijklmnopqrstuv",
	"VACANCYD_TEST_PASSWORD": "correct horse battery staple",
	"VACANCYD_TEST_EMPTY":    "",
}

func testOptions() Options {
	return Options{
		LookupEnv: func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok },
		UnitFiles: []string{}, // the unit check has its own test
		GOOS:      "linux",
	}
}

// expectations reads "# expect: ..." and "# expect-warning: ..." comment lines.
func expectations(t *testing.T, data []byte) (errs, warns []string) {
	t.Helper()
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "# expect: "); ok {
			errs = append(errs, v)
		}
		if v, ok := strings.CutPrefix(line, "# expect-warning: "); ok {
			warns = append(warns, v)
		}
	}
	return errs, warns
}

func problemLines(ps Problems) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key + ": " + p.Message
	}
	return out
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// TestTestdata walks testdata/*.good.toml (must load, with any expected
// warnings) and *.bad.toml (must fail with every expected message at its key).
func TestTestdata(t *testing.T) {
	// Git does not keep file modes: make the secret files private as an
	// operator would, so only the warnings a file expects appear.
	secrets, _ := filepath.Glob("testdata/secrets/*")
	for _, s := range secrets {
		if err := os.Chmod(s, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			wantErrs, wantWarns := expectations(t, data)
			cfg, ps, err := Load(f, testOptions())
			if strings.HasSuffix(f, ".good.toml") {
				if err != nil {
					t.Fatalf("good file refused: %v", err)
				}
				if cfg == nil {
					t.Fatal("good file returned no config")
				}
				if len(wantErrs) > 0 {
					t.Fatal("a .good.toml file must not expect errors")
				}
				got := problemLines(ps.Warnings())
				for _, w := range wantWarns {
					if !containsLine(got, w) {
						t.Errorf("missing warning %q; got:\n%s", w, strings.Join(got, "\n"))
					}
				}
				if len(wantWarns) == 0 && len(got) > 0 {
					t.Errorf("unexpected warnings:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if err == nil {
				t.Fatal("bad file accepted")
			}
			if cfg != nil {
				t.Fatal("bad file returned a config")
			}
			if len(wantErrs) == 0 {
				t.Fatal("a .bad.toml file must list its expected errors")
			}
			got := problemLines(ps.Errors())
			for _, w := range wantErrs {
				if !containsLine(got, w) {
					t.Errorf("missing error %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestEmbeddedDefault(t *testing.T) {
	cfg, ps, err := Parse(EmbeddedDefault(), "", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 0 {
		t.Errorf("embedded default has warnings: %v", ps)
	}
	if cfg.Server.Listen != "127.0.0.1:9811" {
		t.Errorf("api listen = %q", cfg.Server.Listen)
	}
	if len(cfg.Upstreams) != 1 {
		t.Fatalf("want one upstream, got %d", len(cfg.Upstreams))
	}
	u := cfg.Upstreams[0]
	if u.Listen != "127.0.0.1:11435" || u.Target != "http://127.0.0.1:11434" || u.Kind != KindOllama || u.Resource != "gpu0" {
		t.Errorf("default gate = %+v", u)
	}
	if len(cfg.Auth.Tokens) != 0 || !cfg.Auth.TrustLoopback || cfg.Auth.AllowUnauthenticatedRemote {
		t.Errorf("default auth = %+v", cfg.Auth)
	}
}

func TestExampleConfig(t *testing.T) {
	cfg, ps, err := Load("../../vacancyd.example.toml", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 0 {
		t.Errorf("example has warnings: %v", ps)
	}
	for _, addr := range append([]string{cfg.Server.Listen}, cfg.Upstreams[0].Listen) {
		if !IsLoopbackListen(addr) {
			t.Errorf("example listens on %q, outside loopback", addr)
		}
	}
}

// TestDefaultsDocumented checks that the example file states every default:
// loading it must give exactly what loading an empty file gives, apart from
// the upstream it adds.
func TestDefaultsDocumented(t *testing.T) {
	ex, _, err := Load("../../vacancyd.example.toml", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	empty, _, err := Parse(nil, "", testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(struct{ S, L, P any }{ex.Server, ex.Lending, ex.Presence})
	b, _ := json.Marshal(struct{ S, L, P any }{empty.Server, empty.Lending, empty.Presence})
	if !bytes.Equal(a, b) {
		t.Errorf("example config and defaults differ:\nexample:  %s\ndefaults: %s", a, b)
	}
}

func TestRelativeSecretResolvesFromConfigDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "s"), 0o700); err != nil {
		t.Fatal(err)
	}
	token := "kPqZ2t7nR4xM8vB1sL0wYcE6hJ3uA5dG9fTiO2rNqUx"
	if err := os.WriteFile(filepath.Join(dir, "s", "t"), []byte(token+" \n\t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "v.toml")
	if err := os.WriteFile(conf, []byte("[[auth.token]]\nname=\"a\"\nscopes=[\"read\"]\nvalue_file=\"s/t\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // the working directory must not matter
	cfg, _, err := Load(conf, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	tok := cfg.Auth.Tokens[0]
	if tok.Secret.Reveal() != token {
		t.Errorf("secret = %q, want trailing whitespace trimmed", tok.Secret.Reveal())
	}
	if tok.FilePath != filepath.Join(dir, "s", "t") {
		t.Errorf("file path = %q", tok.FilePath)
	}
}

func TestReadableSecretFileWarns(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t"), []byte("kPqZ2t7nR4xM8vB1sL0wYcE6hJ3uA5dG9fTiO2rNqUx"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "v.toml")
	if err := os.WriteFile(conf, []byte("[[auth.token]]\nname=\"a\"\nscopes=[\"read\"]\nvalue_file=\"t\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ps, err := Load(conf, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !containsLine(problemLines(ps.Warnings()), "auth.token[0].value_file: "+filepath.Join(dir, "t")+" is readable by group or others (mode 0644)") {
		t.Errorf("no permission warning: %v", ps)
	}
}

// TestSecretNeverPrinted proves a loaded secret appears in no printed form of
// the config: fmt verbs, slog (text and JSON) and encoding/json.
func TestSecretNeverPrinted(t *testing.T) {
	const inline = "inlineSECRETvalue0123456789abcdefghijkl"
	const fromEnv = "envSECRETvalue0123456789abcdefghijklmnop"
	const cred = "credSECRETvalue0123456789abcdefghijklmn"
	env := map[string]string{"TOK": fromEnv, "CRED": cred}
	data := []byte(`
[[auth.token]]
name = "a"
scopes = ["read"]
value = "` + inline + `"
[[auth.token]]
name = "b"
scopes = ["borrow"]
value_env = "TOK"
[[upstream]]
id = "x"
listen = "127.0.0.1:8001"
target = "http://127.0.0.1:8000"
kind = "openai"
[upstream.credential]
scheme = "bearer"
value_env = "CRED"
`)
	cfg, _, err := Parse(data, "", Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, UnitFiles: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.Tokens[1].Secret.Reveal() != fromEnv || cfg.Upstreams[0].Credential.Secret.Reveal() != cred {
		t.Fatal("secrets not loaded")
	}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
		fmt.Fprintf(&out, verb+"\n", *cfg)
		fmt.Fprintf(&out, verb+"\n", cfg.Auth.Tokens)
		fmt.Fprintf(&out, verb+"\n", cfg.Auth.Tokens[0].Secret)
		fmt.Fprintf(&out, verb+"\n", cfg.Upstreams[0].Credential)
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("cfg", "config", cfg, "token", cfg.Auth.Tokens[0], "secret", cfg.Auth.Tokens[1].Secret)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("cfg", "config", cfg, "token", cfg.Auth.Tokens[0], "secret", cfg.Auth.Tokens[1].Secret, "cred", cfg.Upstreams[0].Credential)
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(j)
	for _, s := range []string{inline, fromEnv, cred} {
		for _, form := range []string{s, fmt.Sprintf("%x", s), fmt.Sprintf("%X", s)} {
			if strings.Contains(out.String(), form) {
				t.Fatalf("secret %q printed:\n%s", s, out.String())
			}
		}
	}
	if !strings.Contains(out.String(), Redacted) {
		t.Fatal("redaction marker missing: the test printed nothing useful")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:11434":                 "http://127.0.0.1:11434",
		"http://user:pw@127.0.0.1:8000/v1":       "http://***@127.0.0.1:8000/v1",
		"http://127.0.0.1:8000/v1?key=abc":       "http://127.0.0.1:8000/v1?***",
		"https://u@h:1/p?x=1#frag":               "https://***@h:1/p?***#frag",
		"http://[::1]:8000/?":                    "http://[::1]:8000/?***",
		"http://a b":                             "***",
		"http://user:p%40ss@[::1]:9/?token=zzzz": "http://***@[::1]:9/?***",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsB64Token(t *testing.T) {
	for s, want := range map[string]bool{
		"abcXYZ019-._~+/": true, "abc==": true, "abc=d": false, "=abc": false,
		"": false, "a b": false, "a\"b": false, "a,b": false, "é": false,
	} {
		if got := IsB64Token(s); got != want {
			t.Errorf("IsB64Token(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestSystemdUnitWarnings(t *testing.T) {
	dir := t.TempDir()
	unit := filepath.Join(dir, "vacancyd.service")
	if err := os.WriteFile(unit, []byte("[Service]\nProtectSystem=strict\nRuntimeDirectory=vacancyd\nReadWritePaths=/etc/vacancyd -/srv/vac\nPrivateTmp=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.UnitFiles = []string{filepath.Join(dir, "missing.service"), unit}
	for sock, warn := range map[string]bool{
		"/run/vacancyd/admin.sock": false,
		"/srv/vac/admin.sock":      false,
		"/tmp/vacancyd.sock":       false,
		"/var/run/other/a.sock":    true,
		"/run/vacancyd2/a.sock":    true,
	} {
		cfg, ps, err := Parse([]byte("[server]\nadmin_socket = \""+sock+"\"\n"), "", opts)
		if err != nil {
			t.Fatal(err)
		}
		got := containsLine(problemLines(ps.Warnings()), "server.admin_socket: the systemd unit ("+unit+")")
		if got != warn {
			t.Errorf("socket %s: warned=%v, want %v (%v)", cfg.Server.AdminSocket, got, warn, ps)
		}
	}
	// The packaged unit is judged when none is installed (nil UnitFiles).
	opts.UnitFiles = nil
	saved := InstalledUnitPaths
	InstalledUnitPaths = []string{filepath.Join(dir, "none")}
	defer func() { InstalledUnitPaths = saved }()
	_, ps, _ := Parse([]byte("[server]\nadmin_socket = \"/srv/x/a.sock\"\n"), "", opts)
	if !containsLine(problemLines(ps.Warnings()), "the systemd unit (packaged unit)") {
		t.Errorf("packaged unit not checked: %v", ps)
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present.toml")
	if err := os.WriteFile(present, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	saved := SearchPaths
	defer func() { SearchPaths = saved }()
	SearchPaths = []string{filepath.Join(dir, "absent.toml"), present}
	noEnv := func(string) (string, bool) { return "", false }
	if src := Locate("", noEnv); src.Path != present || src.Explicit || len(src.Looked) != 2 {
		t.Errorf("search: %+v", src)
	}
	if src := Locate("/x.toml", noEnv); src.Path != "/x.toml" || !src.Explicit {
		t.Errorf("flag: %+v", src)
	}
	env := func(k string) (string, bool) { return "/env.toml", k == EnvConfig }
	if src := Locate("", env); src.Path != "/env.toml" || !src.Explicit {
		t.Errorf("env: %+v", src)
	}
	SearchPaths = []string{filepath.Join(dir, "absent.toml")}
	src := Locate("", noEnv)
	if src.Path != "" || len(src.Looked) != 1 {
		t.Errorf("fallback: %+v", src)
	}
	if cfg, _, err := LoadSource(src, testOptions()); err != nil || len(cfg.Upstreams) != 1 {
		t.Errorf("embedded default via LoadSource: %v", err)
	}
}
