package lending

import "time"

// Presence and GPU-pressure sources report to the engine through Sink. Every
// source has a name ("input-devices", "programs", "session:uid:1000/x11",
// "nvml", "pressure-file") and a readiness: a source that is not ready says
// why, and /status shows it.

// Activity is what a presence source saw of the owner.
type Activity struct {
	// LastInput is the time of the owner's last keyboard or mouse input the
	// source knows of. Zero when the source has seen none.
	LastInput time.Time
	// Inhibited means the owner is there without input: a video call, a
	// film (idle inhibitors), or one of the owner's listed programs running.
	Inhibited bool
	// Until is when this report expires if no newer one arrives (a session
	// reporter that goes quiet); zero means it holds until replaced.
	Until time.Time
}

// Pressure is what a GPU-pressure source saw on one resource.
type Pressure struct {
	// Resource is the resource id; empty means every resource.
	Resource string
	// Active means the owner is using the GPU.
	Active bool
	// Reason explains the pressure for /status ("pid 4242 (blender) uses
	// 2.1 GiB", "state file: rendering").
	Reason string
}

// Sink receives observations. Implementations apply them at once and never
// block for long; sources may call it from any goroutine.
type Sink interface {
	// ReportActivity records a presence source's latest observation.
	ReportActivity(source string, a Activity)
	// ReportPressure records a GPU-pressure source's latest observation for
	// a resource (replacing that source's previous one for it).
	ReportPressure(source string, p Pressure)
	// SetReady records whether a source is ready; reason says why not.
	// A presence source that is not ready contributes nothing; a pressure
	// source that is not ready and required counts as pressure (fail
	// closed).
	SetReady(source string, ready bool, reason string)
	// Forget removes a source (a session reporter that logged out).
	Forget(source string)
}
