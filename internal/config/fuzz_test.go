package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic, a
// refusal must name at least one key, and an accepted config must validate
// cleanly again (loading is deterministic and complete).
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.toml")
	seeds = append(seeds, "../../vacancyd.example.toml")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add(EmbeddedDefault())
	f.Add([]byte("[[upstream]]\n[[upstream]]\nx=1"))
	opts := Options{LookupEnv: func(string) (string, bool) { return "envvalue0123456789abcdefghijklmnopqr", true }, UnitFiles: []string{}, GOOS: "linux"}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, ps, err := Parse(data, "/nonexistent/vacancyd.toml", opts)
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			if len(ps.Errors()) == 0 {
				t.Fatal("refused without a problem")
			}
			for _, p := range ps {
				if p.Key == "" || p.Message == "" || strings.HasPrefix(p.Key, ".") {
					t.Fatalf("problem without a key or message: %+v", p)
				}
			}
			return
		}
		if again := cfg.Validate(opts).Errors(); len(again) > 0 {
			t.Fatalf("accepted config fails validation: %v", again)
		}
	})
}
