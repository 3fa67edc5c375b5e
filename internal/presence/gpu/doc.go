// Package gpu holds vacancyd's GPU-pressure sources: the owner's own use of
// the GPU, which ends lending on the resources it touches.
//
// NVMLSource watches the GPUs through NVML (loaded at run time; a machine
// without an NVIDIA driver gets a readiness state, never a crash). The
// owner's use is every process on a GPU that is not one of the upstream
// inference servers or their children; the servers are found from their
// targets' listening sockets in /proc. Pressure is the owner's processes
// together using more memory or more utilization than configured.
//
// FileSource reads a JSON state file that any tool may write (see
// ParseState) and reports what it says.
//
// Both report to a lending.Sink under the source names SourceNVML and
// SourcePressureFile.
package gpu
