package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// The NVML source, over a fake NVML, drives the real lending engine: the
// owner's process over the threshold takes the GPU back from borrowers
// (gpu_pressure), and when it exits the GPU is lent again. NVML missing is
// a readiness state of the source, and lending goes on.
func TestNVMLPressureDrivesTheEngine(t *testing.T) {
	sw := lending.NewSwitches(true, map[string]bool{"gpu0": true})
	eng := lending.NewEngine(lending.EngineOptions{Policy: lending.Policy{CancelTimeout: time.Second}, Switches: sw, Resources: []string{"gpu0"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	nv := &fakeNVML{}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 8 << 30}}})
	src := NewNVMLSource(eng, testSettings(), NVMLOptions{NVML: nv, ProcRoot: ownerAndServerProc(t).root, PollInterval: 10 * time.Millisecond})
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- src.Run(sctx) }()
	defer func() { scancel(); <-sdone }()

	verdict := func(want lending.Reason) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, why := eng.Admit("gpu0"); why == want {
				return
			}
			if time.Now().After(deadline) {
				_, why := eng.Admit("gpu0")
				t.Fatalf("verdict %q, want %q", why, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	verdict(lending.ReasonNone) // only the upstream server uses the GPU
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 8 << 30}, {PID: 500, UsedMemoryBytes: 2 << 30}}})
	verdict(lending.ReasonGPUPressure)
	if p := eng.Status().Resources["gpu0"].Pressure; !p.Active || len(p.Reasons) == 0 {
		t.Fatalf("pressure in status: %+v", p)
	}
	nv.set(0, fakeDevice{procs: []GPUProcess{{PID: 100, UsedMemoryBytes: 8 << 30}}})
	verdict(lending.ReasonNone)
}

func TestMissingNVMLIsAReadinessStateNotPressure(t *testing.T) {
	sw := lending.NewSwitches(true, map[string]bool{"gpu0": true})
	eng := lending.NewEngine(lending.EngineOptions{Policy: lending.Policy{}, Switches: sw, Resources: []string{"gpu0"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	nv := &fakeNVML{}
	nv.setInitErr(errors.New("libnvidia-ml.so.1 not found"))
	src := NewNVMLSource(eng, testSettings(), NVMLOptions{NVML: nv, PollInterval: 10 * time.Millisecond})
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- src.Run(sctx) }()
	defer func() { scancel(); <-sdone }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := eng.Status()
		var nvml *lending.SourceState
		for i := range st.Inputs {
			if st.Inputs[i].Name == lending.SourceNVML {
				nvml = &st.Inputs[i]
			}
		}
		if nvml != nil && !nvml.Ready {
			if ok, why := eng.Admit("gpu0"); !ok || !st.Ready {
				t.Fatalf("missing NVML blocked lending (%q) or readiness (%v)", why, st.Ready)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("NVML never reported not ready: %+v", st.Inputs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
