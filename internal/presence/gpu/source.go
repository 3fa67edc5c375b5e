package gpu

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// Source names the sources report under.
const (
	SourceNVML         = lending.SourceNVML
	SourcePressureFile = lending.SourcePressureFile
)

// Resource is a GPU that work is lent on.
type Resource struct {
	ID string
	// GPUIndex is the NVML device index.
	GPUIndex int
}

// Settings is what an NVMLSource watches for.
type Settings struct {
	Resources []Resource
	// Upstreams are the servers whose processes (and their children) are
	// the borrowers' GPU use, not the owner's.
	Upstreams []Upstream
	// MemoryThresholdMiB: the owner's processes together holding more GPU
	// memory than this is pressure.
	MemoryThresholdMiB int
	// UtilizationPercent: the owner's processes together using more of
	// the GPU than this is pressure.
	UtilizationPercent int
}

// SettingsFrom takes an NVMLSource's settings from a validated config.
func SettingsFrom(cfg *config.Config) Settings {
	s := Settings{
		MemoryThresholdMiB: cfg.Presence.GPUMemoryThresholdMiB,
		UtilizationPercent: cfg.Presence.GPUUtilizationPercent,
	}
	for _, r := range cfg.Resources {
		s.Resources = append(s.Resources, Resource{ID: r.ID, GPUIndex: r.GPUIndex})
	}
	for _, u := range cfg.Upstreams {
		s.Upstreams = append(s.Upstreams, Upstream{ID: u.ID, Target: u.Target})
	}
	return s
}

// NVMLEnabled reports whether the config asks for the NVML source
// (presence.nvml = "auto"); with "off" the daemon does not start one.
func NVMLEnabled(cfg *config.Config) bool { return cfg.Presence.NVML != "off" }

// NVMLOptions tunes an NVMLSource. Zero values take the defaults.
type NVMLOptions struct {
	// NVML is the library binding; nil means NewNVML().
	NVML NVML
	// PollInterval is how often the GPUs are read (default 1s).
	PollInterval time.Duration
	// RefreshInterval is how often the upstream servers' pids are looked
	// up again (default 5s). A GPU process that is not known to be the
	// owner's also triggers a lookup before it can cause pressure.
	RefreshInterval time.Duration
	// RetryInterval is how often Init is tried again while NVML is
	// unavailable (default 30s).
	RetryInterval time.Duration
	// ProcRoot is the proc filesystem (default "/proc").
	ProcRoot string
	Log      *slog.Logger
}

// NVMLSource reports GPU pressure from the owner's processes on each
// resource's GPU, as seen through NVML. It is not ready, with a reason
// starting "unavailable:", when there is no NVIDIA driver or library, and
// "error:" when NVML stopped answering (it then starts over). A resource
// whose GPU cannot be read (no such gpu_index, a failed query) is under
// pressure, with the error as the reason: the owner's use cannot be ruled
// out.
type NVMLSource struct {
	sink    lending.Sink
	nv      NVML
	proc    procFS
	log     *slog.Logger
	poll    time.Duration
	refresh time.Duration
	retry   time.Duration
	updated chan struct{}

	mu        sync.Mutex
	settings  Settings
	available bool            // Init succeeded and not shut down
	servers   map[int]bool    // upstream servers' pids, from the last lookup
	borrowed  map[uint32]bool // GPU processes borrowed in the last poll

	// Owned by Run.
	lastTry     time.Time
	lastRefresh time.Time
	lastPoll    time.Time
	notes       []string // problems finding the servers
	ready       *bool
	readyReason string
	reported    map[string]string // resource id -> key of the last report
	utilWarned  map[int]bool
	prevOwners  map[uint32]bool
}

// NewNVMLSource returns a source reporting to sink. Run starts it.
func NewNVMLSource(sink lending.Sink, s Settings, o NVMLOptions) *NVMLSource {
	if o.NVML == nil {
		o.NVML = NewNVML()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Second
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 30 * time.Second
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &NVMLSource{
		sink:       sink,
		nv:         o.NVML,
		proc:       procFS{root: o.ProcRoot},
		log:        o.Log.With("component", "gpu-nvml"),
		poll:       o.PollInterval,
		refresh:    o.RefreshInterval,
		retry:      o.RetryInterval,
		updated:    make(chan struct{}, 1),
		settings:   s,
		reported:   map[string]string{},
		utilWarned: map[int]bool{},
	}
}

// Update replaces the settings (a config reload); the next poll, which
// starts at once, uses them.
func (s *NVMLSource) Update(st Settings) {
	s.mu.Lock()
	old := s.settings
	s.settings = st
	s.mu.Unlock()
	for _, r := range old.Resources {
		if !slices.ContainsFunc(st.Resources, func(n Resource) bool { return n.ID == r.ID }) {
			s.sink.ReportPressure(SourceNVML, lending.Pressure{Resource: r.ID})
		}
	}
	select {
	case s.updated <- struct{}{}:
	default:
	}
}

// Run polls until ctx ends, then shuts NVML down. It returns nil.
func (s *NVMLSource) Run(ctx context.Context) error {
	defer s.shutdown()
	t := time.NewTicker(s.poll)
	defer t.Stop()
	force := false
	for {
		s.pollOnce(ctx, time.Now(), force)
		force = false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.updated:
			force = true
		}
	}
}

func (s *NVMLSource) shutdown() {
	s.mu.Lock()
	avail := s.available
	s.available = false
	s.mu.Unlock()
	if avail {
		if err := s.nv.Shutdown(); err != nil {
			s.log.Warn("nvml shutdown", "err", err)
		}
	}
}

// BorrowedMemory is the GPU memory the upstream servers' processes hold on
// device index now, for confirming that a reclaim released VRAM. ok is
// false when NVML is unavailable, the query fails, or NVML cannot tell a
// borrowed process's memory. A server that stays up after unloading keeps
// its own context (a few hundred MiB for CUDA), so compare against what it
// held idle rather than zero.
func (s *NVMLSource) BorrowedMemory(index int) (bytes uint64, ok bool) {
	s.mu.Lock()
	avail, servers, was := s.available, s.servers, s.borrowed
	s.mu.Unlock()
	if !avail {
		return 0, false
	}
	procs, err := s.nv.Processes(index)
	if err != nil {
		return 0, false
	}
	for _, p := range procs {
		if !s.isBorrowed(p.PID, servers, was) {
			continue
		}
		if p.MemoryUnknown {
			return 0, false
		}
		bytes += p.UsedMemoryBytes
	}
	return bytes, true
}

// sample is one poll's reading of one device.
type sample struct {
	procs []GPUProcess
	util  map[uint32]int // nil when the device cannot tell
}

func (s *NVMLSource) pollOnce(ctx context.Context, now time.Time, force bool) {
	s.mu.Lock()
	st, avail := s.settings, s.available
	s.mu.Unlock()
	if !avail {
		if !s.lastTry.IsZero() && now.Sub(s.lastTry) < s.retry {
			return
		}
		s.lastTry = now
		if err := s.nv.Init(); err != nil {
			s.setReady(false, "unavailable: "+err.Error())
			return
		}
		s.refreshServers(ctx, st.Upstreams, now)
		s.mu.Lock()
		s.available = true
		s.mu.Unlock()
		s.logDevices()
	} else if force || now.Sub(s.lastRefresh) >= s.refresh {
		s.refreshServers(ctx, st.Upstreams, now)
	}

	n, err := s.nv.DeviceCount()
	if err != nil {
		// Start over: shut down and try Init again after the retry interval.
		s.shutdown()
		s.lastTry = now
		s.setReady(false, "error: "+err.Error())
		return
	}
	since := s.lastPoll
	if since.IsZero() {
		since = now.Add(-s.poll)
	}
	s.lastPoll = now

	samples := map[int]sample{}
	failed := map[int]string{} // gpu index -> why it could not be read
	for _, r := range st.Resources {
		if _, done := samples[r.GPUIndex]; done || failed[r.GPUIndex] != "" {
			continue
		}
		if r.GPUIndex >= n {
			failed[r.GPUIndex] = fmt.Sprintf("cannot read the GPU: gpu_index %d, but NVML sees %d GPUs", r.GPUIndex, n)
			continue
		}
		sm, err := s.read(r.GPUIndex, since)
		if err != nil {
			failed[r.GPUIndex] = "cannot read the GPU: " + err.Error()
			continue
		}
		samples[r.GPUIndex] = sm
	}

	s.mu.Lock()
	servers, was := s.servers, s.borrowed
	s.mu.Unlock()
	evals, borrowed := s.evaluate(st, samples, servers, was)
	if s.newOwnerPIDs(evals) && s.lastRefresh.Before(now) {
		// A process not seen before may be a server that restarted: look
		// the servers up again before calling it the owner's.
		s.refreshServers(ctx, st.Upstreams, now)
		s.mu.Lock()
		servers = s.servers
		s.mu.Unlock()
		evals, borrowed = s.evaluate(st, samples, servers, was)
		s.newOwnerPIDs(evals)
	}
	s.mu.Lock()
	s.borrowed = borrowed
	s.mu.Unlock()
	for id := range s.reported {
		if !slices.ContainsFunc(st.Resources, func(r Resource) bool { return r.ID == id }) {
			delete(s.reported, id) // removed by Update, which cleared it
		}
	}
	for _, r := range st.Resources {
		e, ok := evals[r.ID]
		if !ok {
			why := failed[r.GPUIndex]
			e = eval{active: true, reason: why, key: "failed|" + why}
		}
		if s.reported[r.ID] != e.key {
			s.reported[r.ID] = e.key
			s.sink.ReportPressure(SourceNVML, lending.Pressure{Resource: r.ID, Active: e.active, Reason: e.reason})
		}
	}
	s.setReady(true, "")
}

func (s *NVMLSource) read(index int, since time.Time) (sample, error) {
	procs, err := s.nv.Processes(index)
	if err != nil {
		return sample{}, err
	}
	util, err := s.nv.ProcessUtilization(index, since)
	if err != nil {
		// Memory alone still tells; say once that utilization cannot.
		if !s.utilWarned[index] {
			s.utilWarned[index] = true
			s.log.Warn("per-process GPU utilization unavailable; only memory counts", "gpu_index", index, "err", err)
		}
		util = nil
	}
	return sample{procs: procs, util: util}, nil
}

func (s *NVMLSource) setReady(ready bool, reason string) {
	if s.ready != nil && *s.ready == ready && s.readyReason == reason {
		return
	}
	s.ready, s.readyReason = &ready, reason
	if ready {
		s.log.Info("nvml ready")
	} else {
		s.log.Warn("nvml not ready", "reason", reason)
	}
	s.sink.SetReady(SourceNVML, ready, reason)
}

func (s *NVMLSource) logDevices() {
	n, err := s.nv.DeviceCount()
	if err != nil {
		return
	}
	for i := range n {
		name, _ := s.nv.Name(i)
		m, _ := s.nv.Memory(i)
		s.log.Info("nvml device", "gpu_index", i, "name", name, "memory", formatBytes(m.Total))
	}
}
