package gate_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// BenchmarkGateVsDirect sends the same requests to a llama.cpp fake
// directly and through a gate, interleaved in one run, and reports the
// time per request of each and their ratio (gate/direct). It asserts
// nothing about time; it shows what the gate costs:
//
//	go test ./internal/gate -run '^$' -bench GateVsDirect -benchtime 2000x
func BenchmarkGateVsDirect(b *testing.B) {
	chat, _ := json.Marshal(map[string]any{"model": "m", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "Say something"}}})
	embed, _ := json.Marshal(map[string]any{"model": "m", "input": strings.Repeat("lorem ipsum ", 256<<10/12)})
	for _, w := range []struct {
		name   string
		method string
		path   string
		body   []byte
	}{
		{"models", "GET", "/v1/models", nil},
		{"chat-stream-16", "POST", "/v1/chat/completions", chat},
		{"embed-256KiB", "POST", "/v1/embeddings", embed},
	} {
		b.Run(w.name, func(b *testing.B) {
			fake := fakeupstream.StartOpenAI(b, fakeupstream.WithTokens(16))
			e := startGate(b, gateConfig{kind: config.KindOpenAI, target: fake.URL, infoLog: true})
			client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, DisableCompression: true}}
			defer client.CloseIdleConnections()
			do := func(base string) time.Duration {
				var body io.Reader
				if w.body != nil {
					body = bytes.NewReader(w.body)
				}
				r, _ := http.NewRequest(w.method, base+w.path, body)
				r.Header.Set("Authorization", "Bearer "+aliceToken)
				r.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(r)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				took := time.Since(start)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s%s: %d %v", base, w.path, resp.StatusCode, err)
				}
				return took
			}
			do(fake.URL) // open the connections
			do(e.URL)
			var direct, gated time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				direct += do(fake.URL)
				gated += do(e.URL)
				if i%512 == 511 {
					b.StopTimer()
					fake.Reset() // the fake keeps every request it saw
					b.StartTimer()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "direct-ns/req")
			b.ReportMetric(float64(gated.Nanoseconds())/float64(b.N), "gate-ns/req")
			b.ReportMetric(float64(gated-direct)/float64(b.N), "overhead-ns/req")
			b.ReportMetric(float64(gated)/float64(direct), "gate/direct")
		})
	}
}
