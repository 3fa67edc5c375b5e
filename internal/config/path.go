package config

import (
	"os"
	"path/filepath"
	"runtime"
)

// EnvConfig names the environment variable that may point at the config file.
const EnvConfig = "VACANCYD_CONFIG"

// SearchPaths are the files looked for, in order, when neither --config nor
// VACANCYD_CONFIG names one. Tests replace it.
var SearchPaths = defaultSearchPaths(runtime.GOOS)

func defaultSearchPaths(goos string) []string {
	switch goos {
	case "windows":
		pd := os.Getenv("ProgramData")
		if pd == "" {
			pd = `C:\ProgramData`
		}
		return []string{filepath.Join(pd, "vacancyd", "vacancyd.toml")}
	case "darwin":
		return []string{"/Library/Application Support/vacancyd/vacancyd.toml", "/usr/local/etc/vacancyd/vacancyd.toml"}
	default:
		return []string{"/etc/vacancyd/vacancyd.toml"}
	}
}

// Source says where a configuration came from.
type Source struct {
	// Path is the file used; empty when running the embedded default.
	Path string
	// Looked lists the files searched before falling back to the embedded default.
	Looked []string
	// Explicit is true when --config or VACANCYD_CONFIG named the file.
	Explicit bool
}

// Locate picks the config file: flag, then VACANCYD_CONFIG, then the first of
// SearchPaths that exists. With none, Source.Path is empty (embedded default).
// An explicitly named file is returned even if missing, so loading it fails.
func Locate(flagPath string, lookupEnv func(string) (string, bool)) Source {
	if flagPath != "" {
		return Source{Path: flagPath, Explicit: true}
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if p, ok := lookupEnv(EnvConfig); ok && p != "" {
		return Source{Path: p, Explicit: true}
	}
	src := Source{}
	for _, p := range SearchPaths {
		src.Looked = append(src.Looked, p)
		if _, err := os.Stat(p); err == nil {
			src.Path = p
			return src
		}
	}
	return src
}

// LoadSource loads the located file, or the embedded default when none exists.
func LoadSource(src Source, opts Options) (*Config, Problems, error) {
	if src.Path == "" {
		return Parse(EmbeddedDefault(), "", opts)
	}
	return Load(src.Path, opts)
}
