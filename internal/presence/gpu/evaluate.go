package gpu

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ownerProc is one of the owner's processes on a GPU.
type ownerProc struct {
	pid        uint32
	name       string
	mem        uint64
	memUnknown bool
	util       int
}

// eval is the verdict for one resource.
type eval struct {
	active bool
	reason string
	// key changes when the verdict, the owner's processes or the server
	// lookup problems do; amounts alone do not cause a report.
	key    string
	owners []ownerProc
}

// maxListed bounds the processes a reason names.
const maxListed = 5

// evaluate classifies each resource's GPU processes as borrowed (an
// upstream server or a descendant, or a process that was borrowed in the
// previous poll: NVML lists an exiting process a little after /proc stops
// showing it) or the owner's, and applies the limits. It returns the
// borrowed pids too.
func (s *NVMLSource) evaluate(st Settings, samples map[int]sample, servers map[int]bool, wasBorrowed map[uint32]bool) (map[string]eval, map[uint32]bool) {
	limitBytes := uint64(max(st.MemoryThresholdMiB, 0)) << 20
	out := map[string]eval{}
	borrowed := map[uint32]bool{}
	byIndex := map[int]eval{}
	for _, r := range st.Resources {
		if e, ok := byIndex[r.GPUIndex]; ok {
			out[r.ID] = e
			continue
		}
		sm, ok := samples[r.GPUIndex]
		if !ok {
			continue
		}
		var owners []ownerProc
		var mem uint64
		util := 0
		for _, p := range sm.procs {
			if s.isBorrowed(p.PID, servers, wasBorrowed) {
				borrowed[p.PID] = true
				continue
			}
			op := ownerProc{pid: p.PID, name: s.proc.comm(int(p.PID)), mem: p.UsedMemoryBytes, memUnknown: p.MemoryUnknown, util: sm.util[p.PID]}
			if op.memUnknown {
				op.mem = 0
			}
			mem += op.mem
			util += op.util
			owners = append(owners, op)
		}
		memOver := mem > limitBytes
		utilOver := sm.util != nil && util > st.UtilizationPercent
		e := eval{active: memOver || utilOver, owners: owners}
		slices.SortFunc(owners, func(a, b ownerProc) int {
			return cmp.Or(cmp.Compare(b.mem, a.mem), cmp.Compare(b.util, a.util), cmp.Compare(a.pid, b.pid))
		})
		pids := make([]string, len(owners))
		for i, o := range owners {
			pids[i] = fmt.Sprint(o.pid)
		}
		slices.Sort(pids)
		e.key = fmt.Sprintf("%t|%s|%s", e.active, strings.Join(pids, ","), strings.Join(s.notes, ";"))
		e.reason = s.reason(e, mem, util, sm.util != nil, limitBytes, st.UtilizationPercent)
		byIndex[r.GPUIndex] = e
		out[r.ID] = e
	}
	return out, borrowed
}

// isBorrowed reports whether a GPU process belongs to an upstream server.
func (s *NVMLSource) isBorrowed(pid uint32, servers map[int]bool, wasBorrowed map[uint32]bool) bool {
	return wasBorrowed[pid] || len(servers) > 0 && s.proc.descendsFrom(int(pid), servers)
}

// reason explains a verdict: when active, the owner's processes with their
// amounts at the time; when not, which processes are under the limits.
func (s *NVMLSource) reason(e eval, mem uint64, util int, utilKnown bool, limitBytes uint64, limitUtil int) string {
	var b strings.Builder
	if e.active {
		fmt.Fprintf(&b, "owner's GPU use %s (limit %s)", formatBytes(mem), formatBytes(limitBytes))
		if utilKnown {
			fmt.Fprintf(&b, ", %d%% (limit %d%%)", util, limitUtil)
		}
		b.WriteString(": ")
		for i, o := range e.owners {
			if i == maxListed {
				fmt.Fprintf(&b, ", and %d more", len(e.owners)-maxListed)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "pid %d (%s) ", o.pid, nameOr(o.name))
			if o.memUnknown {
				b.WriteString("memory unknown")
			} else {
				b.WriteString(formatBytes(o.mem))
			}
			if utilKnown {
				fmt.Fprintf(&b, " %d%%", o.util)
			}
		}
	} else if len(e.owners) > 0 {
		b.WriteString("owner's GPU processes under the limits: ")
		for i, o := range e.owners {
			if i == maxListed {
				fmt.Fprintf(&b, ", and %d more", len(e.owners)-maxListed)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "pid %d (%s)", o.pid, nameOr(o.name))
		}
	}
	if len(s.notes) > 0 && len(e.owners) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(s.notes, "; "))
	}
	return b.String()
}

func nameOr(name string) string {
	if name == "" {
		return "?"
	}
	return name
}

// newOwnerPIDs reports whether any owner process was not an owner process
// in the previous poll, and remembers this poll's.
func (s *NVMLSource) newOwnerPIDs(evals map[string]eval) bool {
	cur := map[uint32]bool{}
	fresh := false
	for _, e := range evals {
		for _, o := range e.owners {
			cur[o.pid] = true
			if !s.prevOwners[o.pid] {
				fresh = true
			}
		}
	}
	s.prevOwners = cur
	return fresh
}

// refreshServers looks up the upstream servers' pids from their listening
// sockets. Problems (a socket whose process is not visible) become notes
// that the reasons carry and the log shows once.
func (s *NVMLSource) refreshServers(ctx context.Context, ups []Upstream, now time.Time) {
	s.lastRefresh = now
	servers, notes := s.discover(ctx, ups)
	if !slices.Equal(notes, s.notes) {
		for _, n := range notes {
			s.log.Warn("upstream server lookup", "problem", n)
		}
		s.notes = notes
	}
	s.mu.Lock()
	s.servers = servers
	s.mu.Unlock()
}

func (s *NVMLSource) discover(ctx context.Context, ups []Upstream) (map[int]bool, []string) {
	servers := map[int]bool{}
	if len(ups) == 0 {
		return servers, nil
	}
	ls, err := s.proc.listeners()
	if err != nil {
		return servers, []string{err.Error()}
	}
	var notes []string
	inodes := map[string][]uint64{}
	want := map[uint64]bool{}
	for _, u := range ups {
		ep, local, err := localEndpoint(ctx, u.Target)
		if err != nil {
			notes = append(notes, fmt.Sprintf("upstream %s: %v", u.ID, err))
			continue
		}
		if !local {
			continue
		}
		for _, l := range ls {
			if ep.serves(l.addr) {
				inodes[u.ID] = append(inodes[u.ID], l.inode)
				want[l.inode] = true
			}
		}
	}
	owners, denied, err := s.proc.socketOwners(want)
	if err != nil {
		return servers, append(notes, err.Error())
	}
	for _, u := range ups {
		if len(inodes[u.ID]) == 0 {
			continue // not listening now: nothing of it to exclude
		}
		found := false
		for _, ino := range inodes[u.ID] {
			for _, pid := range owners[ino] {
				servers[pid] = true
				found = true
			}
		}
		if !found {
			n := fmt.Sprintf("upstream %s: the process listening on its port is not visible", u.ID)
			if denied > 0 {
				n += fmt.Sprintf(" (%d processes' descriptors unreadable: vacancyd needs to run as root or as the server's user)", denied)
			}
			notes = append(notes, n)
		}
	}
	return servers, notes
}

// formatBytes writes a byte count in MiB below 1 GiB and GiB above.
func formatBytes(n uint64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
