//go:build linux

package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	ollama "github.com/ollama/ollama/api"

	"github.com/vacancyd/vacancyd/internal/testutil/realollama"
)

// roTiming is one streamed generation as its client saw it.
type roTiming struct {
	ttft   time.Duration // request sent to first token
	decode time.Duration // first token to last token
	tokens int
}

// roGenerate streams n tokens of the same seeded generation and times it.
func roGenerate(ctx context.Context, c *ollama.Client, n int) (roTiming, error) {
	var tm roTiming
	var first, last time.Time
	start := time.Now()
	err := c.Generate(ctx, &ollama.GenerateRequest{Model: roModel, Prompt: "benchmark",
		Options: map[string]any{"num_predict": n, "seed": 1}},
		func(r ollama.GenerateResponse) error {
			if r.Response == "" {
				return nil
			}
			now := time.Now()
			if tm.tokens == 0 {
				first = now
			}
			last = now
			tm.tokens++
			return nil
		})
	tm.ttft, tm.decode = first.Sub(start), last.Sub(first)
	return tm, err
}

// BenchmarkRealOllamaGateVersusDirect streams the same seeded generation
// from the real Ollama directly and through a vacancyd gate (with a borrow
// token, the lending engine admitting each request), alternating which goes
// first, and reports each side's time to first token and decode rate as the
// client sees them, and the gate's ratios to direct.
//
//	go test ./internal/e2e -run '^$' -bench RealOllama
func BenchmarkRealOllamaGateVersusDirect(b *testing.B) {
	e := roStart(b, roSetup{})
	e.waitLendable(b)
	e.ollama.Warm(b, roModel)
	u, _ := url.Parse(e.ollama.URL)
	direct := ollama.NewClient(u, realollama.HTTPClient())
	gated := e.ollamaClient("ollama")
	const n = 32
	ctx := context.Background()

	var sums [2]roTiming // 0 direct, 1 gate
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			side := (i + k) % 2
			c := direct
			if side == 1 {
				c = gated
			}
			tm, err := roGenerate(ctx, c, n)
			if err != nil || tm.tokens != n {
				b.Fatalf("side %d: %v (%d tokens)", side, err, tm.tokens)
			}
			sums[side].ttft += tm.ttft
			sums[side].decode += tm.decode
			sums[side].tokens += tm.tokens
		}
	}
	runs := float64(b.N)
	rate := func(s roTiming) float64 { return float64(s.tokens-int(runs)) / s.decode.Seconds() }
	ttft := func(s roTiming) float64 { return float64(s.ttft.Microseconds()) / 1000 / runs }
	b.ReportMetric(rate(sums[0]), "direct-tok/s")
	b.ReportMetric(rate(sums[1]), "gate-tok/s")
	b.ReportMetric(rate(sums[1])/rate(sums[0]), "gate/direct-tok/s")
	b.ReportMetric(ttft(sums[0]), "direct-ttft-ms")
	b.ReportMetric(ttft(sums[1]), "gate-ttft-ms")
	b.ReportMetric(ttft(sums[1])/ttft(sums[0]), "gate/direct-ttft")
}
