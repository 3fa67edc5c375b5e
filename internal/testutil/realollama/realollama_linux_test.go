//go:build linux

package realollama

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/vacancyd/vacancyd/internal/testutil/gguf"
)

func TestRequestsParsesGinLines(t *testing.T) {
	log := `time=2026-11-30T01:31:54.432Z level=DEBUG source=routes.go:297 msg="generate request"
[GIN] 2026/11/30 - 01:31:56 | 200 |  1.989871222s |       127.0.0.1 | POST     "/api/generate"
[GIN] 2026/11/30 - 01:31:57 | 404 |     163.414µs |       127.0.0.1 | DELETE   "/api/delete"
not a [GIN] line | 200 |
`
	got := Requests(log)
	if len(got) != 2 || got[0].Status != 200 || got[0].Method != "POST" || got[0].Path != "/api/generate" || got[0].Client != "127.0.0.1" ||
		got[1].Status != 404 || got[1].Method != "DELETE" || got[1].Path != "/api/delete" {
		t.Fatalf("Requests = %+v", got)
	}
	if Count(got, "POST", "/api/generate") != 1 || Count(got, "GET", "/api/generate") != 0 {
		t.Fatal("Count")
	}
}

// The harness end to end: the pinned binary serves the generated model,
// streams tokens, logs its requests, and the tap relays and records.
func TestServerRunsTheTinyModel(t *testing.T) {
	s := Start(t, Options{})
	if !IsVersion(Binary(t)) {
		t.Fatalf("%s is not Ollama %s", Binary(t), Version)
	}
	s.CreateModel(t, "tiny", gguf.Tiny())
	ctx := context.Background()
	list, err := s.Client().List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "tiny:latest" || list.Models[0].Details.Family != "llama" {
		t.Fatalf("List = %+v, %v", list, err)
	}

	tap := s.Tap(t)
	u, _ := url.Parse(tap.URL)
	c := api.NewClient(u, HTTPClient())
	var chunks []api.GenerateResponse
	err = c.Generate(ctx, &api.GenerateRequest{Model: "tiny", Prompt: "hello", Options: map[string]any{"num_predict": 12, "seed": 1}},
		func(r api.GenerateResponse) error { chunks = append(chunks, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	last := chunks[len(chunks)-1]
	if !last.Done || last.DoneReason != "length" || last.EvalCount != 12 || len(chunks) != 13 {
		t.Fatalf("%d chunks, last %+v", len(chunks), last)
	}
	text := ""
	for _, ch := range chunks {
		text += ch.Response
	}
	if strings.TrimSpace(text) == "" || strings.ContainsAny(text, "\ufffd") {
		t.Fatalf("generated %q, want plain text", text)
	}
	if n := Count(Requests(s.Log.String()), "POST", "/api/generate"); n != 1 {
		t.Fatalf("%d generate lines in Ollama's log", n)
	}
	if got := s.Loaded(t); len(got) != 1 || got[0].Name != "tiny:latest" {
		t.Fatalf("/api/ps = %+v", got)
	}

	ex := tap.Exchanges()
	if len(ex) != 1 || ex[0].Method != "POST" || ex[0].Path != "/api/generate" || ex[0].Status != 200 || !ex[0].Complete ||
		!strings.Contains(string(ex[0].Answer), `"done":true`) {
		t.Fatalf("tap exchanges = %+v", ex)
	}

	// A client that hangs up mid-stream: the tap records it as the one
	// that closed, the answer unfinished; Ollama ends the request.
	mark := s.Log.Mark()
	cctx, cancel := context.WithCancel(ctx)
	n := 0
	_ = c.Generate(cctx, &api.GenerateRequest{Model: "tiny", Prompt: "cut", Options: map[string]any{"num_predict": -1}},
		func(r api.GenerateResponse) error {
			if n++; n == 3 {
				cancel()
			}
			return nil
		})
	cancel()
	waitFor(t, "Ollama to log the cut request", func() bool { return Count(Requests(s.Log.Since(mark)), "POST", "/api/generate") == 1 })
	ex = tap.Exchanges()
	if len(ex) != 2 || ex[1].Complete || ex[1].ClosedBy != "client" || strings.Contains(string(ex[1].Answer), `"done":true`) {
		t.Fatalf("the cut exchange = %+v", ex[len(ex)-1])
	}

	// Stop ends the server and its runner.
	pgid := s.cmd.Process.Pid
	s.stop(t)
	if !s.Stopped() {
		t.Fatal("server still running")
	}
	if err := syscall.Kill(-pgid, 0); err == nil {
		t.Fatal("a process of Ollama's group survived the stop")
	}
	if !slices.ContainsFunc(strings.Split(s.Log.String(), "\n"), func(l string) bool { return strings.Contains(l, "llama runner started") }) {
		t.Fatal("no runner start in the log")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// scripts/test builds the binary before the tests; it must build this one.
func TestScriptBuildsThisVersion(t *testing.T) {
	cache, err := CachePath()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(cache)))
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nOLLAMA_VERSION="+Version+"\n") {
		t.Fatalf("scripts/test does not build Ollama %s (OLLAMA_VERSION=%s)", Version, Version)
	}
	if filepath.Base(filepath.Dir(cache)) != "ollama-"+Version {
		t.Fatalf("cache path %s", cache)
	}
}
