package gate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// BenchmarkGateVsDirect sends the same requests to a llama.cpp fake
// directly, through a gate and, where nginx is installed, through nginx as
// a plain reverse proxy, interleaved in one run, and reports the time per
// request of each and their ratios (gate/direct, gate/nginx). It asserts
// nothing about time; it shows what the gate costs next to a well-known
// proxy doing no authentication or policy at all:
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
			nginxURL := startNginx(b, fake.URL)
			do(fake.URL) // open the connections
			do(e.URL)
			var direct, gated, proxied time.Duration
			if nginxURL != "" {
				do(nginxURL)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				direct += do(fake.URL)
				gated += do(e.URL)
				if nginxURL != "" {
					proxied += do(nginxURL)
				}
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
			if nginxURL != "" {
				b.ReportMetric(float64(proxied.Nanoseconds())/float64(b.N), "nginx-ns/req")
				b.ReportMetric(float64(gated)/float64(proxied), "gate/nginx")
			}
		})
	}
}

// startNginx runs nginx as a plain streaming reverse proxy to target and
// returns its URL, or "" (with a note) where nginx is not installed.
func startNginx(b *testing.B, target string) string {
	b.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.Log("nginx is not installed: comparing with a direct connection only")
		return ""
	}
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  upstream fake { server %[2]s; keepalive 16; }
  server {
    listen %[3]s;
    client_max_body_size 64m;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering on;
    }
  }
}
`, dir, strings.TrimPrefix(target, "http://"), addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("nginx did not start; see %s/error.log", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
