// Package version reports which build of vacancyd is running: its release
// version, the source revision it was built from and the Go toolchain.
//
// Release builds set Version and Revision at link time:
//
//	go build -ldflags "-X github.com/vacancyd/vacancyd/internal/version.Version=v1.2.3 \
//	  -X github.com/vacancyd/vacancyd/internal/version.Revision=$(git rev-parse HEAD)" ./cmd/vacancyd
//
// Without them, both come from the module and VCS information the Go
// toolchain embeds, or read "dev" and "unknown".
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is vacancyd's release version, e.g. "v1.2.3".
var Version string

// Revision is the source revision (commit) the binary was built from.
var Revision string

// GoVersion is the Go toolchain that built the binary, e.g. "go1.26.0".
var GoVersion = runtime.Version()

func init() {
	info, ok := debug.ReadBuildInfo()
	Version, Revision = fill(Version, Revision, info, ok)
}

// fill supplies Version and Revision defaults from the embedded build info.
func fill(version, revision string, info *debug.BuildInfo, ok bool) (string, string) {
	if ok && info != nil {
		if version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		if revision == "" {
			var modified bool
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					revision = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if revision != "" && modified {
				revision += "-dirty"
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	if revision == "" {
		revision = "unknown"
	}
	return version, revision
}
