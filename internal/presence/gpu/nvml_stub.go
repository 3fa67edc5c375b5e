//go:build !(linux && cgo)

package gpu

import "time"

// NewNVML returns this build's NVML binding. Without Linux and cgo there is
// none: Init always reports ErrUnavailable.
func NewNVML() NVML { return stubNVML{} }

type stubNVML struct{}

func (stubNVML) Init() error                         { return ErrUnavailable }
func (stubNVML) Shutdown() error                     { return nil }
func (stubNVML) DeviceCount() (int, error)           { return 0, errNotInitialized }
func (stubNVML) Name(int) (string, error)            { return "", errNotInitialized }
func (stubNVML) Memory(int) (MemoryInfo, error)      { return MemoryInfo{}, errNotInitialized }
func (stubNVML) Processes(int) ([]GPUProcess, error) { return nil, errNotInitialized }
func (stubNVML) ProcessUtilization(int, time.Time) (map[uint32]int, error) {
	return nil, errNotInitialized
}
