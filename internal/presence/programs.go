package presence

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// Programs reports the owner as present while any of the listed programs
// runs (a game, an editor): Activity{Inhibited: true, Until: now +
// 2*Interval} at every scan that finds one, and Activity{} when none runs.
// It reads /proc, so it is ready on Linux and not ready elsewhere.
type Programs struct {
	// Names are process names as ps shows them ("steam", "blender").
	Names []string
	// Interval is how often /proc is scanned; DefaultProgramsEvery when
	// zero.
	Interval time.Duration
	// ProcDir is the proc file system; "/proc" when empty.
	ProcDir string
	// Log receives the programs seen starting and stopping; nil logs
	// nothing.
	Log *slog.Logger
}

// Run scans until ctx ends and returns nil then.
func (p *Programs) Run(ctx context.Context, sink lending.Sink) error {
	every := p.Interval
	if every <= 0 {
		every = DefaultProgramsEvery
	}
	log := orDiscard(p.Log).With("component", "presence", "source", SourcePrograms)
	var (
		ready     *bool
		lastErr   string
		reported  bool
		prevFound []string
	)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		found, err := p.Scan()
		now := time.Now()
		if err != nil {
			if ready == nil || *ready || err.Error() != lastErr {
				log.Warn("cannot scan for the owner's programs", "err", err)
				sink.SetReady(SourcePrograms, false, err.Error())
			}
			ready, lastErr, reported, prevFound = ptrTo(false), err.Error(), false, nil
		} else {
			if ready == nil || !*ready {
				sink.SetReady(SourcePrograms, true, "")
				ready, lastErr = ptrTo(true), ""
			}
			if !slices.Equal(found, prevFound) {
				if len(found) > 0 {
					log.Info("owner's programs running", "programs", found)
				} else if reported {
					log.Info("owner's programs no longer running")
				}
			}
			switch {
			case len(found) > 0:
				// Repeated at every scan: each report expires after two
				// intervals, so one missed scan does not end the presence.
				sink.ReportActivity(SourcePrograms, lending.Activity{Inhibited: true, Until: now.Add(2 * every)})
			case !reported || len(prevFound) > 0:
				sink.ReportActivity(SourcePrograms, lending.Activity{})
			}
			reported, prevFound = true, found
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// Scan returns the listed programs running now, sorted, each once. A
// process matches a name by its comm (the kernel's name for it, cut to 15
// bytes), or else by the base name of its executable or of its first
// argument, which keep names longer than 15 bytes whole and catch programs
// that renamed themselves.
func (p *Programs) Scan() ([]string, error) {
	dir := p.ProcDir
	if dir == "" {
		dir = "/proc"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list processes in %s: %w", dir, err)
	}
	names := map[string]bool{}
	for _, n := range p.Names {
		names[n] = true
	}
	found := map[string]bool{}
	for _, e := range entries {
		if !isPID(e.Name()) || len(found) == len(names) {
			continue
		}
		pdir := filepath.Join(dir, e.Name())
		comm, err := os.ReadFile(filepath.Join(pdir, "comm"))
		if err != nil {
			continue // the process ended
		}
		c := strings.TrimSuffix(string(comm), "\n")
		if names[c] {
			found[c] = true
			continue
		}
		for _, alt := range []string{arg0(pdir), exeBase(pdir)} {
			if alt != "" && names[alt] {
				found[alt] = true
				break
			}
		}
	}
	out := make([]string, 0, len(found))
	for n := range found {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func isPID(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// arg0 is the base name of the process's first argument; "" for kernel
// threads and processes that cannot be read.
func arg0(pdir string) string {
	b, err := os.ReadFile(filepath.Join(pdir, "cmdline"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return filepath.Base(string(b))
}

// exeBase is the base name of the process's executable; "" when it cannot
// be read (another account's process, without privilege).
func exeBase(pdir string) string {
	t, err := os.Readlink(filepath.Join(pdir, "exe"))
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(t, " (deleted)"))
}
