package config

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/vacancyd/vacancyd/packaging"
)

// InstalledUnitPaths are where an installed vacancyd systemd unit is looked for.
var InstalledUnitPaths = []string{
	"/etc/systemd/system/vacancyd.service",
	"/usr/lib/systemd/system/vacancyd.service",
	"/lib/systemd/system/vacancyd.service",
}

// checkSystemdUnits warns when the unit that runs vacancyd would forbid it to
// create the admin socket (ProtectSystem=strict without the socket's directory
// among the writable paths).
func (c *Config) checkSystemdUnits(ps *Problems, opts Options) {
	name, data := "packaged unit", packaging.SystemdUnit
	if opts.UnitFiles != nil {
		if len(opts.UnitFiles) == 0 {
			return
		}
		data = nil
		for _, p := range opts.UnitFiles {
			if b, err := os.ReadFile(p); err == nil {
				name, data = p, b
				break
			}
		}
	} else {
		for _, p := range InstalledUnitPaths {
			if b, err := os.ReadFile(p); err == nil {
				name, data = p, b
				break
			}
		}
	}
	if data == nil {
		return
	}
	dir := filepath.Dir(c.Server.AdminSocket)
	if !strings.HasPrefix(dir, "/") {
		return
	}
	if w := unitWritablePaths(data); w != nil && !underAny(dir, w) {
		ps.warnf("server.admin_socket", "the systemd unit (%s) makes %s read-only; add it to ReadWritePaths= or use a path under %s", name, dir, strings.Join(w, ", "))
	}
}

// unitWritablePaths returns the paths a unit may write, or nil when the unit
// does not make the file system read-only.
func unitWritablePaths(unit []byte) []string {
	strict := false
	var paths []string
	privateTmp := false
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "ProtectSystem":
			strict = v == "strict"
		case "ReadWritePaths":
			for _, p := range strings.Fields(v) {
				paths = append(paths, strings.TrimLeft(p, "-+"))
			}
		case "RuntimeDirectory", "StateDirectory", "CacheDirectory", "LogsDirectory":
			base := map[string]string{"RuntimeDirectory": "/run", "StateDirectory": "/var/lib", "CacheDirectory": "/var/cache", "LogsDirectory": "/var/log"}[k]
			for _, p := range strings.Fields(v) {
				paths = append(paths, filepath.Join(base, p))
			}
		case "PrivateTmp":
			privateTmp = v == "true" || v == "yes" || v == "1"
		}
	}
	if !strict {
		return nil
	}
	if privateTmp {
		paths = append(paths, "/tmp", "/var/tmp")
	}
	return paths
}

func underAny(dir string, roots []string) bool {
	for _, r := range roots {
		r = filepath.Clean(r)
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}
