//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDevice checks the real NVML on a machine with an NVIDIA GPU. It runs
// only when asked:
//
//	VACANCYD_NVML_DEVICE_TEST=1 go test -run TestDevice -v ./internal/presence/gpu/
//
// VACANCYD_NVML_UPSTREAM=http://127.0.0.1:11434 also names a running
// inference server whose processes must count as borrowed, not the owner's.
// It logs what NVML sees (devices, memory, processes, utilization), so the
// output also helps choose gpu_memory_threshold_mib above the desktop's
// own baseline (Xorg, the compositor, a browser).
func TestDevice(t *testing.T) {
	if os.Getenv("VACANCYD_NVML_DEVICE_TEST") != "1" {
		t.Skip("set VACANCYD_NVML_DEVICE_TEST=1 on a machine with an NVIDIA GPU")
	}
	nv := NewNVML()
	if err := nv.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	n, err := nv.DeviceCount()
	if err != nil || n == 0 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	proc := procFS{root: "/proc"}
	for i := range n {
		name, err := nv.Name(i)
		if err != nil {
			t.Errorf("device %d: name: %v", i, err)
		}
		m, err := nv.Memory(i)
		if err != nil || m.Total == 0 || m.Used > m.Total {
			t.Errorf("device %d: memory %+v, %v", i, m, err)
		}
		t.Logf("device %d: %s, memory %s used of %s", i, name, formatBytes(m.Used), formatBytes(m.Total))
		procs, err := nv.Processes(i)
		if err != nil {
			t.Errorf("device %d: processes: %v", i, err)
		}
		util, err := nv.ProcessUtilization(i, time.Now().Add(-2*time.Second))
		t.Logf("device %d: per-process utilization %v (err %v)", i, util, err)
		for _, p := range procs {
			mem := formatBytes(p.UsedMemoryBytes)
			if p.MemoryUnknown {
				mem = "unknown"
			}
			t.Logf("  pid %d (%s): %s, %d%%", p.PID, nameOr(proc.comm(int(p.PID))), mem, util[p.PID])
		}
	}
	if err := nv.Shutdown(); err != nil {
		t.Errorf("Shutdown: %v", err)
	}

	st := Settings{MemoryThresholdMiB: 256, UtilizationPercent: 10}
	for i := range n {
		st.Resources = append(st.Resources, Resource{ID: fmt.Sprintf("gpu%d", i), GPUIndex: i})
	}
	if u := os.Getenv("VACANCYD_NVML_UPSTREAM"); u != "" {
		st.Upstreams = []Upstream{{ID: "upstream", Target: u}}
	}
	sink := newSink()
	src := NewNVMLSource(sink, st, NVMLOptions{Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	s := sink.waitFor(t, "a ready NVML source reporting every GPU", func(s state) bool {
		if !s.ready[SourceNVML].ready {
			return false
		}
		for _, r := range st.Resources {
			if _, ok := s.pressure["nvml/"+r.ID]; !ok {
				return false
			}
		}
		return true
	})
	for _, r := range st.Resources {
		p := s.pressure["nvml/"+r.ID]
		t.Logf("%s: pressure %t: %s", r.ID, p.Active, p.Reason)
		b, ok := src.BorrowedMemory(r.GPUIndex)
		if !ok {
			t.Errorf("%s: BorrowedMemory not ok with NVML up", r.ID)
		}
		t.Logf("%s: borrowed memory %s", r.ID, formatBytes(b))
		if st.Upstreams != nil && strings.Contains(p.Reason, "not visible") {
			t.Errorf("%s: the upstream's server was not found: %s", r.ID, p.Reason)
		}
	}
}
