#!/bin/sh
# Check vacancyd's NVML source on a machine with an NVIDIA GPU: lists the
# devices, the processes on them with memory and utilization, and checks the
# source comes up ready with a pressure verdict for every GPU.
#
#   internal/presence/gpu/testdata/device-check.sh [upstream-target-url]
#
# With an upstream URL (e.g. http://127.0.0.1:11434, a running Ollama with a
# model loaded), its processes must come out as borrowed memory, not as the
# owner's use. Run from the repository root, as root (to read other users'
# /proc/<pid>/fd) like the service.
set -eu
command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi not found; continuing"
VACANCYD_NVML_DEVICE_TEST=1 VACANCYD_NVML_UPSTREAM="${1:-}" \
	go test -count=1 -run '^TestDevice$' -v ./internal/presence/gpu/
