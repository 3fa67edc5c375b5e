package gpu

import (
	"errors"
	"time"
)

// NVML is the part of the NVIDIA Management Library the NVMLSource uses.
// NewNVML returns the real binding; tests supply a fake. Methods other than
// Init and Shutdown are only called after Init succeeded.
type NVML interface {
	// Init loads the library and initialises it. An error means NVML is
	// unavailable (no driver, no library); Init may be tried again later.
	Init() error
	// Shutdown releases what Init acquired.
	Shutdown() error
	// DeviceCount is the number of GPUs NVML sees.
	DeviceCount() (int, error)
	// Name is the device's product name.
	Name(index int) (string, error)
	// Memory is the device's memory use as a whole.
	Memory(index int) (MemoryInfo, error)
	// Processes lists the processes using the device (compute and
	// graphics), one entry per pid.
	Processes(index int) ([]GPUProcess, error)
	// ProcessUtilization is each process's mean SM utilization in percent
	// over the samples taken after since (zero: every sample NVML holds).
	// Processes with no sample are absent. ErrNotSupported when the
	// device cannot tell.
	ProcessUtilization(index int, since time.Time) (map[uint32]int, error)
}

// GPUProcess is one process using a GPU.
type GPUProcess struct {
	PID uint32
	// UsedMemoryBytes is the GPU memory the process holds; meaningless
	// when MemoryUnknown (NVML cannot always tell, e.g. in containers).
	UsedMemoryBytes uint64
	MemoryUnknown   bool
}

// MemoryInfo is a device's memory in bytes.
type MemoryInfo struct {
	Total, Used uint64
}

var (
	// ErrUnavailable is what Init returns where this build has no NVML
	// binding (not Linux, or built without cgo).
	ErrUnavailable = errors.New("nvml is not supported by this build (needs linux and cgo)")
	// ErrNotSupported is returned for a query the device does not support.
	ErrNotSupported = errors.New("not supported by the device")
	// errNotInitialized guards calls made before a successful Init.
	errNotInitialized = errors.New("nvml is not initialised")
)
