//go:build linux && cgo

package gpu

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NewNVML returns the real NVML binding. It opens libnvidia-ml.so.1 only
// when Init is called, so a machine without an NVIDIA driver runs fine.
func NewNVML() NVML { return &realNVML{lib: nvml.New()} }

// realNVML wraps go-nvml. Calling into the library before a successful Init
// would jump to unresolved symbols, so every method checks ready first.
type realNVML struct {
	lib nvml.Interface

	mu      sync.Mutex
	ready   bool
	devices map[int]nvml.Device
}

func nvmlErr(op string, ret nvml.Return) error {
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED:
		return fmt.Errorf("%s: %w", op, ErrNotSupported)
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%s: libnvidia-ml.so.1 not found (no NVIDIA driver installed)", op)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%s: the NVIDIA driver is not loaded", op)
	}
	return fmt.Errorf("%s: %s", op, ret.Error())
}

func (r *realNVML) Init() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		return nil
	}
	if err := nvmlErr("nvml init", r.lib.Init()); err != nil {
		return err
	}
	r.ready = true
	r.devices = map[int]nvml.Device{}
	return nil
}

func (r *realNVML) Shutdown() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ready {
		return nil
	}
	r.ready = false
	r.devices = nil
	return nvmlErr("nvml shutdown", r.lib.Shutdown())
}

func (r *realNVML) DeviceCount() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ready {
		return 0, errNotInitialized
	}
	n, ret := r.lib.DeviceGetCount()
	return n, nvmlErr("device count", ret)
}

// device returns the handle for index; r.mu is held.
func (r *realNVML) device(index int) (nvml.Device, error) {
	if !r.ready {
		return nil, errNotInitialized
	}
	if d, ok := r.devices[index]; ok {
		return d, nil
	}
	d, ret := r.lib.DeviceGetHandleByIndex(index)
	if err := nvmlErr(fmt.Sprintf("device %d", index), ret); err != nil {
		return nil, err
	}
	r.devices[index] = d
	return d, nil
}

func (r *realNVML) Name(index int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.device(index)
	if err != nil {
		return "", err
	}
	name, ret := d.GetName()
	return name, nvmlErr(fmt.Sprintf("device %d: name", index), ret)
}

func (r *realNVML) Memory(index int) (MemoryInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.device(index)
	if err != nil {
		return MemoryInfo{}, err
	}
	m, ret := d.GetMemoryInfo()
	return MemoryInfo{Total: m.Total, Used: m.Used}, nvmlErr(fmt.Sprintf("device %d: memory", index), ret)
}

// valueNotAvailable is NVML_VALUE_NOT_AVAILABLE, what usedGpuMemory holds
// when the driver cannot tell.
const valueNotAvailable = ^uint64(0)

func (r *realNVML) Processes(index int) ([]GPUProcess, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.device(index)
	if err != nil {
		return nil, err
	}
	compute, ret := d.GetComputeRunningProcesses()
	if err := nvmlErr(fmt.Sprintf("device %d: compute processes", index), ret); err != nil {
		return nil, err
	}
	graphics, ret := d.GetGraphicsRunningProcesses()
	if err := nvmlErr(fmt.Sprintf("device %d: graphics processes", index), ret); err != nil && ret != nvml.ERROR_NOT_SUPPORTED {
		return nil, err
	}
	// A process using CUDA and graphics is listed twice with the same
	// memory; keep one entry per pid.
	byPID := map[uint32]int{}
	var out []GPUProcess
	for _, p := range append(compute, graphics...) {
		gp := GPUProcess{PID: p.Pid, UsedMemoryBytes: p.UsedGpuMemory}
		if p.UsedGpuMemory == valueNotAvailable {
			gp = GPUProcess{PID: p.Pid, MemoryUnknown: true}
		}
		if i, ok := byPID[p.Pid]; ok {
			if !gp.MemoryUnknown && (out[i].MemoryUnknown || gp.UsedMemoryBytes > out[i].UsedMemoryBytes) {
				out[i] = gp
			}
			continue
		}
		byPID[p.Pid] = len(out)
		out = append(out, gp)
	}
	return out, nil
}

func (r *realNVML) ProcessUtilization(index int, since time.Time) (map[uint32]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, err := r.device(index)
	if err != nil {
		return nil, err
	}
	var ts uint64 // NVML's sample clock: microseconds since the epoch
	if !since.IsZero() && since.UnixMicro() > 0 {
		ts = uint64(since.UnixMicro())
	}
	for range 3 { // samples may arrive between sizing and reading
		samples, ret := d.GetProcessUtilization(ts)
		switch ret {
		case nvml.SUCCESS:
			return meanUtilization(samples), nil
		case nvml.ERROR_NOT_FOUND: // no sample newer than ts
			return map[uint32]int{}, nil
		case nvml.ERROR_INSUFFICIENT_SIZE:
			if len(samples) == 0 {
				return map[uint32]int{}, nil
			}
			continue
		}
		return nil, nvmlErr(fmt.Sprintf("device %d: process utilization", index), ret)
	}
	return nil, fmt.Errorf("device %d: process utilization: samples kept arriving while reading", index)
}

func meanUtilization(samples []nvml.ProcessUtilizationSample) map[uint32]int {
	sum := map[uint32]int{}
	n := map[uint32]int{}
	for _, s := range samples {
		sum[s.Pid] += int(s.SmUtil)
		n[s.Pid]++
	}
	for pid := range sum {
		sum[pid] /= n[pid]
	}
	return sum
}
