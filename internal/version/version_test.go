package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// Link-time values win over the embedded build info.
func TestFillKeepsLinkerValues(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}
	v, r := fill("v1.0.0", "deadbeef", info, true)
	if v != "v1.0.0" || r != "deadbeef" {
		t.Fatalf("fill = %q, %q; want the linker's v1.0.0, deadbeef", v, r)
	}
}

// Without link-time values the module version and VCS revision are used, and a
// build from a modified tree says so.
func TestFillFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	v, r := fill("", "", info, true)
	if v != "v0.3.0" || r != "0123abcd-dirty" {
		t.Fatalf("fill = %q, %q; want v0.3.0, 0123abcd-dirty", v, r)
	}
}

// A development build with no information still reports something readable.
func TestFillFallbacks(t *testing.T) {
	v, r := fill("", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true)
	if v != "dev" || r != "unknown" {
		t.Fatalf("fill = %q, %q; want dev, unknown", v, r)
	}
	v, r = fill("", "", nil, false)
	if v != "dev" || r != "unknown" {
		t.Fatalf("fill without build info = %q, %q; want dev, unknown", v, r)
	}
}

func TestPackageValuesSet(t *testing.T) {
	if Version == "" || Revision == "" || !strings.Contains(GoVersion, "go") {
		t.Fatalf("Version=%q Revision=%q GoVersion=%q; want all set", Version, Revision, GoVersion)
	}
}
