package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

// Fake process tree shared by the engine tests: an upstream server (pid
// 100) listening on 127.0.0.1:11434 with a runner child (101) and its
// child (102); the owner's processes 500 (blender) and 501 (Xorg).
func ownerAndServerProc(t *testing.T) *fakeProc {
	p := newFakeProc(t)
	p.listen("127.0.0.1:11434", 7001)
	p.process(1, 0, "systemd")
	p.process(100, 1, "ollama", 7001)
	p.process(101, 100, "ollama")
	p.process(102, 101, "ollama")
	p.process(500, 1, "blender")
	p.process(501, 1, "Xorg")
	return p
}

func testSettings() Settings {
	return Settings{
		Resources:          []Resource{{ID: "gpu0", GPUIndex: 0}},
		Upstreams:          []Upstream{{ID: "ollama", Target: "http://127.0.0.1:11434"}},
		MemoryThresholdMiB: 256,
		UtilizationPercent: 10,
	}
}

// startSource runs an NVMLSource polling fast until the test ends.
func startSource(t *testing.T, nv NVML, proc *fakeProc, st Settings, o NVMLOptions) (*NVMLSource, *recordingSink) {
	t.Helper()
	sink := newSink()
	o.NVML = nv
	if proc != nil {
		o.ProcRoot = proc.root
	}
	if o.PollInterval == 0 {
		o.PollInterval = 10 * time.Millisecond
	}
	src := NewNVMLSource(sink, st, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return src, sink
}

func pressureIs(key string, active bool) func(state) bool {
	return func(s state) bool {
		p, ok := s.pressure[key]
		return ok && p.Active == active && s.ready[SourceNVML].ready
	}
}

func TestOwnerMemoryOverThresholdIsPressure(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 8 << 30}, {PID: 500, UsedMemoryBytes: 2 << 30}}})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	s := sink.waitFor(t, "pressure on gpu0", pressureIs("nvml/gpu0", true))
	r := s.pressure["nvml/gpu0"].Reason
	for _, want := range []string{"pid 500 (blender)", "2.0 GiB", "limit 256 MiB"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason %q does not name %q", r, want)
		}
	}
	if strings.Contains(r, "pid 100") {
		t.Errorf("reason %q counts the upstream server as the owner's", r)
	}
}

func TestOwnerUnderThresholdIsNoPressure(t *testing.T) {
	nv := &fakeNVML{}
	// The server and its descendants hold plenty; the owner's Xorg is small.
	nv.set(0, fakeDevice{procs: []GPUProcess{
		{PID: 100, UsedMemoryBytes: 1 << 30}, {PID: 101, UsedMemoryBytes: 9 << 30}, {PID: 102, UsedMemoryBytes: 3 << 30},
		{PID: 501, UsedMemoryBytes: 200 * mib},
	}, util: map[uint32]int{101: 95, 501: 3}})
	src, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	s := sink.waitFor(t, "no pressure on gpu0", pressureIs("nvml/gpu0", false))
	if r := s.pressure["nvml/gpu0"].Reason; !strings.Contains(r, "pid 501 (Xorg)") || strings.Contains(r, "pid 10") {
		t.Errorf("reason %q: want the owner's Xorg listed and no server process", r)
	}
	got, ok := src.BorrowedMemory(0)
	if !ok || got != 13<<30 {
		t.Errorf("BorrowedMemory(0) = %d, %t; want %d, true (server, runner and its child)", got, ok, 13<<30)
	}
}

func TestOwnerUtilizationOverThresholdIsPressure(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 100 * mib}}, util: map[uint32]int{500: 40}})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	s := sink.waitFor(t, "pressure on gpu0", pressureIs("nvml/gpu0", true))
	if r := s.pressure["nvml/gpu0"].Reason; !strings.Contains(r, "40% (limit 10%)") {
		t.Errorf("reason %q does not give the utilization", r)
	}
}

func TestUtilizationUnsupportedLeavesMemory(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 100 * mib}}, utilErr: ErrNotSupported})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	sink.waitFor(t, "no pressure, ready", pressureIs("nvml/gpu0", false))
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}, utilErr: ErrNotSupported})
	sink.waitFor(t, "pressure from memory alone", pressureIs("nvml/gpu0", true))
}

func TestPressureEndsWhenOwnerProcessExits(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	sink.waitFor(t, "pressure", pressureIs("nvml/gpu0", true))
	nv.set(0, fakeDevice{})
	s := sink.waitFor(t, "pressure over", pressureIs("nvml/gpu0", false))
	if r := s.pressure["nvml/gpu0"].Reason; r != "" {
		t.Errorf("reason %q with no owner process; want empty", r)
	}
}

// Amounts moving under an unchanged verdict are not news: the sink hears
// once, at start.
func TestReportsOnlyOnChange(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	sink.waitFor(t, "pressure", pressureIs("nvml/gpu0", true))
	for i := range 5 {
		nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: uint64(2+i) << 30}}})
		n := nv.readCount()
		sink.waitFor(t, "two more polls", func(state) bool { return nv.readCount() >= n+2 })
	}
	s := sink.snapshot()
	if n := s.reports["nvml/gpu0"]; n != 1 {
		t.Errorf("%d pressure reports for an unchanged verdict; want 1:\n%s", n, strings.Join(s.events, "\n"))
	}
	var readies int
	for _, e := range s.events {
		if strings.HasPrefix(e, "ready ") {
			readies++
		}
	}
	if readies != 1 {
		t.Errorf("%d readiness reports; want 1", readies)
	}
}

// A runner the server starts, and a server that restarted under a new pid,
// are borrowed use from the first poll that sees them, even with the
// periodic server lookup far off.
func TestRestartedServerIsNotPressure(t *testing.T) {
	proc := ownerAndServerProc(t)
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 1 << 30}}})
	_, sink := startSource(t, nv, proc, testSettings(), NVMLOptions{RefreshInterval: time.Hour})
	sink.waitFor(t, "no pressure", pressureIs("nvml/gpu0", false))

	proc.process(103, 100, "ollama") // a new runner
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 1 << 30}, {PID: 103, UsedMemoryBytes: 6 << 30}}})
	n := nv.readCount()
	sink.waitFor(t, "polls", func(state) bool { return nv.readCount() >= n+3 })

	proc.remove(103)
	proc.remove(100)
	proc.process(200, 1, "ollama", 7001) // the server again, new pid, same socket
	proc.process(201, 200, "ollama")
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 200, UsedMemoryBytes: 1 << 30}, {PID: 201, UsedMemoryBytes: 6 << 30}}})
	n = nv.readCount()
	sink.waitFor(t, "polls", func(state) bool { return nv.readCount() >= n+3 })

	for _, e := range sink.snapshot().events {
		if strings.Contains(e, "active=true") {
			t.Fatalf("the server's own processes caused pressure: %s", e)
		}
	}
}

func TestInitErrorIsNotReady(t *testing.T) {
	nv := &fakeNVML{initErr: errors.New("libnvidia-ml.so.1 not found")}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}})
	src, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{RetryInterval: 20 * time.Millisecond})
	s := sink.waitFor(t, "not ready", func(s state) bool { _, ok := s.ready[SourceNVML]; return ok })
	if r := s.ready[SourceNVML]; r.ready || r.reason != "unavailable: libnvidia-ml.so.1 not found" {
		t.Errorf("readiness %+v; want not ready, \"unavailable: libnvidia-ml.so.1 not found\"", r)
	}
	if len(s.pressure) != 0 {
		t.Errorf("pressure reported without NVML: %v", s.pressure)
	}
	if _, ok := src.BorrowedMemory(0); ok {
		t.Error("BorrowedMemory ok without NVML")
	}
	if nv.readCount() != 0 {
		t.Error("devices queried although Init failed")
	}
	// A driver that turns up later is picked up.
	nv.setInitErr(nil)
	sink.waitFor(t, "ready after a later Init", pressureIs("nvml/gpu0", true))
}

func TestDeviceCountErrorStartsOver(t *testing.T) {
	nv := &fakeNVML{countErr: errors.New("gpu is lost")}
	nv.set(0, fakeDevice{})
	_, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{RetryInterval: time.Hour})
	s := sink.waitFor(t, "not ready", func(s state) bool { _, ok := s.ready[SourceNVML]; return ok })
	if r := s.ready[SourceNVML]; r.ready || r.reason != "error: gpu is lost" {
		t.Errorf("readiness %+v; want not ready, \"error: gpu is lost\"", r)
	}
	nv.mu.Lock()
	inits, shutdowns := nv.inits, nv.shutdowns
	nv.mu.Unlock()
	if inits != 1 || shutdowns != 1 {
		t.Errorf("inits %d, shutdowns %d; want 1 and 1 (shut down to start over)", inits, shutdowns)
	}
}

// A GPU that cannot be read is pressure on its resource (the owner's use
// cannot be ruled out) and leaves the others alone.
func TestUnreadableGPUIsPressureOnItsResource(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{})
	st := testSettings()
	st.Resources = append(st.Resources, Resource{ID: "gpu1", GPUIndex: 1})
	_, sink := startSource(t, nv, ownerAndServerProc(t), st, NVMLOptions{})
	s := sink.waitFor(t, "pressure on gpu1", pressureIs("nvml/gpu1", true))
	if r := s.pressure["nvml/gpu1"].Reason; r != "cannot read the GPU: gpu_index 1, but NVML sees 1 GPUs" {
		t.Errorf("gpu1 reason %q", r)
	}
	if p, ok := s.pressure["nvml/gpu0"]; !ok || p.Active {
		t.Errorf("gpu0 should be reported without pressure: %+v, %t", p, ok)
	}
	nv.set(0, fakeDevice{err: errors.New("gpu is lost")})
	s = sink.waitFor(t, "pressure on gpu0", pressureIs("nvml/gpu0", true))
	if r := s.pressure["nvml/gpu0"].Reason; r != "cannot read the GPU: gpu is lost" {
		t.Errorf("gpu0 reason %q", r)
	}
	nv.set(0, fakeDevice{})
	sink.waitFor(t, "gpu0 readable again", pressureIs("nvml/gpu0", false))
}

// A listening server whose process cannot be found leaves its processes
// counted as the owner's (fail closed), and the reason says why.
func TestInvisibleServerIsNamedInReason(t *testing.T) {
	proc := newFakeProc(t)
	proc.listen("0.0.0.0:8188", 9001) // nobody visible holds it
	proc.process(300, 1, "python3")
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 300, UsedMemoryBytes: 4 << 30}}})
	st := testSettings()
	st.Upstreams = []Upstream{{ID: "comfyui", Target: "http://localhost:8188"}}
	_, sink := startSource(t, nv, proc, st, NVMLOptions{})
	s := sink.waitFor(t, "pressure", pressureIs("nvml/gpu0", true))
	if r := s.pressure["nvml/gpu0"].Reason; !strings.Contains(r, "upstream comfyui: the process listening on its port is not visible") {
		t.Errorf("reason %q does not explain the missing server", r)
	}
}

func TestUpdateChangesThresholdsAndClearsRemovedResources(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}})
	nv.set(1, fakeDevice{procs: []GPUProcess{{PID: 500, UsedMemoryBytes: 1 << 30}}})
	st := testSettings()
	st.Resources = append(st.Resources, Resource{ID: "gpu1", GPUIndex: 1})
	src, sink := startSource(t, nv, ownerAndServerProc(t), st, NVMLOptions{PollInterval: time.Hour})
	sink.waitFor(t, "pressure on both", func(s state) bool { return s.pressure["nvml/gpu0"].Active && s.pressure["nvml/gpu1"].Active })
	st = testSettings()
	st.MemoryThresholdMiB = 2048
	src.Update(st)
	sink.waitFor(t, "gpu0 under the new limit, gpu1 cleared", func(s state) bool {
		return !s.pressure["nvml/gpu0"].Active && !s.pressure["nvml/gpu1"].Active
	})
}

func TestBorrowedMemoryUnknownIsNotOK(t *testing.T) {
	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 101, MemoryUnknown: true}}})
	src, sink := startSource(t, nv, ownerAndServerProc(t), testSettings(), NVMLOptions{})
	sink.waitFor(t, "ready", pressureIs("nvml/gpu0", false))
	if _, ok := src.BorrowedMemory(0); ok {
		t.Error("BorrowedMemory ok although NVML cannot tell the runner's memory")
	}
}
