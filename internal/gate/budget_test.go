package gate_test

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/gate"
)

// holdUpstream is an OpenAI-compatible stand-in that reads and discards
// each request body, then answers only once released: admitted requests
// keep their bodies' budget until then. It keeps nothing, so the memory a
// test measures is the gate's.
type holdUpstream struct {
	URL     string
	release chan struct{}
	arrived atomic.Int64
	bytes   atomic.Int64
	expect  atomic.Int64 // requests that still carried Expect
	once    sync.Once
}

// Release lets every held request answer.
func (h *holdUpstream) Release() { h.once.Do(func() { close(h.release) }) }

func startHoldUpstream(t testing.TB) *holdUpstream {
	t.Helper()
	h := &holdUpstream{release: make(chan struct{})}
	t.Cleanup(h.Release)
	_, h.URL = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Expect") != "" {
			h.expect.Add(1)
		}
		n, _ := io.Copy(io.Discard, r.Body)
		h.bytes.Add(n)
		h.arrived.Add(1)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[]}`)
	}), testLimits(), discardLog)
	return h
}

// patternBody is n bytes of 'a', generated as read: the clients of a
// memory test allocate nothing per body.
type patternBody struct{ n int64 }

func (p *patternBody) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	for i := range b {
		b[i] = 'a'
	}
	p.n -= int64(len(b))
	return len(b), nil
}

func (p *patternBody) Close() error { return nil }

// heapSampler records the largest heap seen (live and not yet collected
// objects) while it runs. Sampling can only miss a peak, never invent
// one, so a bound on it cannot fail spuriously.
type heapSampler struct {
	stop, done chan struct{}
	peak       uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveHeap is the heap after a full collection: what is really held.
func liveHeap() uint64 {
	runtime.GC()
	return heapNow()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			h.peak = max(h.peak, heapNow())
			select {
			case <-h.stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// vmRSS is the process's resident set from /proc/self/status, 0 where
// there is none (not Linux). Logged, not asserted: the race detector's
// shadow memory inflates it.
func vmRSS(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

const mib = 1 << 20

// TestBodyBudgetUnderAbuse: many clients send large declared bodies at
// once against a small global body budget (shared by two gates, as the
// daemon shares it). Exactly as many as the budget holds are admitted and
// held upstream; every other one is refused at once with 503
// refused_body_budget and Retry-After, before its body is read. The
// heap stays bounded by the budget, not by what the clients send, and the
// budget returns to zero afterwards.
func TestBodyBudgetUnderAbuse(t *testing.T) {
	const (
		body    = 4 * mib
		budget  = 8 * mib
		clients = 48
	)
	lim := limitsWith(func(l *config.Limits) {
		l.MaxBodyBytes, l.BodyBudgetBytes = body, budget
	})
	up := startHoldUpstream(t)
	g1 := startGate(t, gateConfig{kind: config.KindOpenAI, target: up.URL, limits: lim})
	g2 := startGate(t, gateConfig{kind: config.KindOpenAI, target: up.URL, limits: lim, shared: g1})
	// Clients offer the body with Expect: 100-continue, as curl does for
	// large bodies, so a refused client never sends it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, ExpectContinueTimeout: time.Minute, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()

	base := liveHeap()
	rss0 := vmRSS("VmRSS")
	sampler := startHeapSampler()
	statuses := make(chan *http.Response, clients)
	var wg sync.WaitGroup
	for i := range clients {
		e := []*gateEnv{g1, g2}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			hr, _ := http.NewRequestWithContext(waitCtx(t), "POST", e.URL+"/v1/chat/completions", &patternBody{n: body})
			hr.ContentLength = body
			hr.Header.Set("Authorization", "Bearer "+aliceToken)
			hr.Header.Set("Expect", "100-continue")
			resp, err := client.Do(hr)
			if err != nil {
				t.Errorf("client: %v", err)
				statuses <- nil
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses <- resp
		}()
	}
	admit := budget / body
	refused := 0
	for refused < clients-admit {
		resp := <-statuses
		if resp == nil {
			t.FailNow()
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("refused client: %d Retry-After %q, want 503 while the budget is held", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		refused++
	}
	eventually(t, "the admitted bodies reaching the upstream", func() bool { return up.arrived.Load() == int64(admit) })
	held := liveHeap()
	if g1.Budget.Used() != budget {
		t.Fatalf("budget used %d while %d bodies are held, want %d", g1.Budget.Used(), admit, budget)
	}
	up.Release()
	wg.Wait()
	close(statuses)
	for resp := range statuses {
		if resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("admitted client: %v", resp)
		}
	}
	peak := sampler.finish()
	eventually(t, "the budget back to 0", func() bool { return g1.Budget.Used() == 0 })
	n := g1.counter(t, gate.OutcomeBodyBudget) + g2.counter(t, gate.OutcomeBodyBudget)
	if n != clients-float64(admit) {
		t.Fatalf("refused_body_budget counted %v, want %d", n, clients-admit)
	}
	if up.bytes.Load() != int64(admit)*body {
		t.Fatalf("the upstream got %d bytes, want %d", up.bytes.Load(), admit*body)
	}
	if up.expect.Load() != 0 {
		t.Fatal("Expect: 100-continue was forwarded with a body the gate already holds")
	}
	offered := uint64(clients * body)
	t.Logf("offered %d MiB; heap: base %d MiB, held %d MiB, peak %d MiB; RSS %d -> %d MiB (peak %d MiB)",
		offered/mib, base/mib, held/mib, peak/mib, rss0/mib, vmRSS("VmRSS")/mib, vmRSS("VmHWM")/mib)
	// While saturated the gate holds the budget's worth of bodies and
	// little else; at its worst the heap (with garbage not yet collected)
	// stays within a few budgets, far below what the clients offered.
	if held > base+budget+8*mib {
		t.Errorf("held heap %d MiB over a base of %d MiB with a %d MiB budget", held/mib, base/mib, budget/mib)
	}
	if peak > base+4*budget+16*mib {
		t.Errorf("peak heap %d MiB over a base of %d MiB with a %d MiB budget (clients offered %d MiB)", peak/mib, base/mib, budget/mib, offered/mib)
	}
}

// TestBodyBudgetChunked: chunked bodies, whose size is unknown, take the
// budget in steps as they arrive; against a small budget some are refused
// mid-body with refused_body_budget, none is lost, the heap stays bounded
// and the budget returns to zero.
func TestBodyBudgetChunked(t *testing.T) {
	const (
		body    = 4 * mib
		budget  = 8 * mib
		clients = 32
	)
	lim := limitsWith(func(l *config.Limits) {
		l.MaxBodyBytes, l.BodyBudgetBytes = 2*body, budget
	})
	up := startHoldUpstream(t)
	e := startGate(t, gateConfig{kind: config.KindOpenAI, target: up.URL, limits: lim})
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()

	base := liveHeap()
	sampler := startHeapSampler()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hr, _ := http.NewRequestWithContext(waitCtx(t), "POST", e.URL+"/v1/chat/completions", &patternBody{n: body})
			hr.ContentLength = -1 // chunked
			hr.Header.Set("Authorization", "Bearer "+aliceToken)
			// A refused client may see its 503 or, as the gate stops
			// reading mid-upload, a write error: both are fine here; the
			// gate's counters are the record.
			if resp, err := client.Do(hr); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	// Every request ends admitted (its body reached the upstream, which
	// holds it) or refused.
	eventually(t, "every request admitted or refused", func() bool {
		return float64(up.arrived.Load())+e.counter(t, gate.OutcomeBodyBudget) == clients
	})
	up.Release()
	wg.Wait()
	peak := sampler.finish()
	refused := e.counter(t, gate.OutcomeBodyBudget)
	if refused < 1 {
		t.Fatalf("no chunked body was refused against a %d MiB budget", budget/mib)
	}
	eventually(t, "the budget back to 0", func() bool { return e.Budget.Used() == 0 })
	e.waitCounter(t, gate.OutcomeAdmitted, clients-refused)
	t.Logf("%v of %d refused; heap base %d MiB, peak %d MiB", refused, clients, base/mib, peak/mib)
	if peak > base+4*budget+16*mib {
		t.Errorf("peak heap %d MiB over a base of %d MiB with a %d MiB budget (clients offered %d MiB)", peak/mib, base/mib, budget/mib, clients*body/mib)
	}
}
