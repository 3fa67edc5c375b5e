//go:build linux && cgo

package gpu

import (
	"os"
	"strings"
	"testing"
)

// driverPresent reports whether this machine has an NVIDIA driver's NVML.
func driverPresent() bool {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu", "/usr/local/nvidia/lib64"} {
		if _, err := os.Stat(dir + "/libnvidia-ml.so.1"); err == nil {
			return true
		}
	}
	_, err := os.Stat("/proc/driver/nvidia/version")
	return err == nil
}

// On a machine without the driver the real binding fails Init cleanly,
// every query is refused rather than jumping into a missing library, and
// the source says "unavailable: ...".
func TestRealNVMLWithoutDriverIsUnavailable(t *testing.T) {
	if driverPresent() {
		t.Skip("an NVIDIA driver is installed; see TestDevice")
	}
	nv := NewNVML()
	err := nv.Init()
	if err == nil {
		t.Fatal("Init succeeded without a driver")
	}
	if !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("Init error %q does not say the library or driver is missing", err)
	}
	if _, err := nv.DeviceCount(); err == nil {
		t.Error("DeviceCount after a failed Init succeeded")
	}
	if _, err := nv.Processes(0); err == nil {
		t.Error("Processes after a failed Init succeeded")
	}
	if err := nv.Shutdown(); err != nil {
		t.Errorf("Shutdown after a failed Init: %v", err)
	}

	src, sink := startSource(t, NewNVML(), nil, testSettings(), NVMLOptions{})
	s := sink.waitFor(t, "readiness", func(s state) bool { _, ok := s.ready[SourceNVML]; return ok })
	if r := s.ready[SourceNVML]; r.ready || !strings.HasPrefix(r.reason, "unavailable: ") {
		t.Errorf("readiness %+v; want not ready, \"unavailable: ...\"", r)
	}
	if _, ok := src.BorrowedMemory(0); ok {
		t.Error("BorrowedMemory ok without a driver")
	}
}
