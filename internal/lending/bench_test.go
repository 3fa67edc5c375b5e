package lending

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkReclaimLatency measures how fast the engine takes a resource
// back, over many trials: from the moment a presence event is handed to
// the engine (ReportActivity, as the input-devices watcher and the session
// reporter do) to admissions closed (Admit refuses), and to every borrowed
// stream closed (the context each Acquire returned is cancelled and the
// "gate" ends the work). reclaim_grace is 0, so this is the engine's own
// latency, not the grace. It reports p50 and p99 of both in microseconds;
// nothing is asserted about them. "Admissions closed" is when a caller
// polling Admit first sees the refusal; the engine closes admissions before
// it cancels any work, but on few cores the poller may be scheduled after
// the streams have already closed.
//
//	go test -run '^$' -bench ReclaimLatency ./internal/lending/
func BenchmarkReclaimLatency(b *testing.B) {
	for _, streams := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchReclaim(b, streams) })
	}
}

func benchReclaim(b *testing.B, streams int) {
	sw := NewSwitches(true, map[string]bool{"gpu0": true})
	e := NewEngine(EngineOptions{
		Policy:    Policy{IdleAfter: time.Minute, PresenceSources: true, CancelTimeout: 10 * time.Second},
		Switches:  sw,
		Resources: []string{"gpu0"},
	})
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { e.Run(ctx); close(ran) }()
	defer func() { stop(); <-ran }()

	admitted := func() bool { ok, _ := e.Admit("gpu0"); return ok }
	waitUntil := func(what string, cond func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			runtime.Gosched()
		}
	}

	var closedLat, streamsLat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		// The owner has been away an hour: lending (again, after the
		// previous trial's reclaim has finished).
		e.ReportActivity(SourceInputDevices, Activity{LastInput: time.Now().Add(-time.Hour)})
		waitUntil("lending", admitted)
		// Borrowed streams, each closed by its "gate" when reclaim cancels
		// its context.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var lastClosed time.Time
		for range streams {
			wctx, w, why := e.Acquire(context.Background(), WorkSpec{Upstream: "ollama", Resource: "gpu0", Borrower: "bench", Model: "m"})
			if w == nil {
				b.Fatalf("acquire refused: %s", why)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-wctx.Done()
				at := time.Now()
				w.End()
				mu.Lock()
				if at.After(lastClosed) {
					lastClosed = at
				}
				mu.Unlock()
			}()
		}
		b.StartTimer()

		// The owner touches the keyboard.
		event := time.Now()
		e.ReportActivity(SourceInputDevices, Activity{LastInput: event})
		waitUntil("admissions to close", func() bool { return !admitted() })
		closed := time.Now()
		wg.Wait()

		b.StopTimer()
		closedLat = append(closedLat, closed.Sub(event))
		streamsLat = append(streamsLat, lastClosed.Sub(event))
		b.StartTimer()
	}
	b.StopTimer()
	report := func(name string, d []time.Duration) {
		if len(d) == 0 {
			return
		}
		slices.Sort(d)
		at := func(p int) time.Duration { return d[min(len(d)-1, len(d)*p/100)] }
		b.ReportMetric(float64(at(50))/float64(time.Microsecond), name+"-p50-µs")
		b.ReportMetric(float64(at(99))/float64(time.Microsecond), name+"-p99-µs")
	}
	report("admissions-closed", closedLat)
	report("streams-closed", streamsLat)
}
