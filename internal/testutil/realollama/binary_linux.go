//go:build linux

package realollama

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module and Version are the Ollama release the tests run: the newest that
// builds from `go install` with cgo on a plain x86-64 CPU (later releases
// build ggml through CMake only).
const (
	Module  = "github.com/ollama/ollama"
	Version = "v0.6.5"
)

// BinaryEnv names an environment variable that, when set, points at an
// Ollama binary to use instead of the cache (it must be Version).
const BinaryEnv = "VACANCYD_OLLAMA_BIN"

// buildTimeout bounds a build inside a test (about two minutes on two
// cores; scripts/test builds before the tests so that this is rare).
const buildTimeout = 15 * time.Minute

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// CachePath is where the built binary is kept: .bin/ollama-<Version>/ollama
// in the repository root (the directory `go env GOMOD` names).
func CachePath() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the vacancyd module (go env GOMOD is %q)", mod)
	}
	return filepath.Join(filepath.Dir(mod), ".bin", "ollama-"+Version, "ollama"), nil
}

// Binary returns the path of the Ollama binary, building it into the cache
// once (per test process, serialised across processes by a lock file) when
// it is missing. Where that is impossible it skips the test with the reason,
// or fails it when VACANCYD_REQUIRE_TOOLS=1.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = findOrBuild() })
	if binErr != nil {
		msg := fmt.Sprintf("no Ollama %s binary for the real-upstream tests: %v\n"+
			"(scripts/test installs g++ and builds it into .bin before the tests; "+
			"or set %s to a built binary)", Version, binErr, BinaryEnv)
		if os.Getenv("VACANCYD_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return binPath
}

// IsVersion reports whether path is an Ollama binary built from Module at
// Version (read from its embedded build information with go version -m).
func IsVersion(path string) bool {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return false
	}
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "mod" && f[1] == Module && f[2] == Version {
			return true
		}
	}
	return false
}

func findOrBuild() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if !IsVersion(p) {
			return "", fmt.Errorf("%s=%s is not an Ollama %s binary (go version -m)", BinaryEnv, p, Version)
		}
		return p, nil
	}
	path, err := CachePath()
	if err != nil {
		return "", err
	}
	if IsVersion(path) {
		return path, nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Another test process may be building it: wait for it, then look again.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if IsVersion(path) {
		return path, nil
	}
	if err := Build(dir); err != nil {
		return "", err
	}
	if !IsVersion(path) {
		return "", fmt.Errorf("go install left no Ollama %s binary at %s", Version, path)
	}
	return path, nil
}

// Build runs `go install github.com/ollama/ollama@<Version>` with GOBIN=dir
// and cgo on. It needs gcc and g++: the release vendors llama.cpp's headers
// (json.hpp, stb_image.h), so no other system package is involved.
func Build(dir string) error {
	for _, cc := range []string{"gcc", "g++"} {
		if _, err := exec.LookPath(cc); err != nil {
			return fmt.Errorf("building Ollama with cgo needs %s (Debian package %s)", cc, cc)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", Module+"@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=1", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return fmt.Errorf("go install %s@%s: %v\n%s", Module, Version, err, tail)
	}
	return nil
}
