package fakeupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitCtx bounds a wait so a broken fake fails the test instead of hanging
// it; nothing is asserted about how long anything takes.
func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type httpResult struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url string, body any, hdr ...string) httpResult {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(waitCtx(t), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return httpResult{status: resp.StatusCode, header: resp.Header, body: b}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// sseEvents reads "data: " payloads of an SSE body.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestStartEveryKindAndRecord(t *testing.T) {
	for _, kind := range []Kind{KindOllama, KindOpenAI, KindComfyUI, KindChatterbox} {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			if s.Kind != kind || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
				t.Fatalf("kind %q url %q", s.Kind, s.URL)
			}
			res := do(t, "POST", s.URL+"/no/such/route?a=1&b=two", `{"x":1}`, "X-Test", "yes")
			if res.status != http.StatusNotFound {
				t.Fatalf("status %d", res.status)
			}
			if s.Count() != 1 {
				t.Fatalf("count %d", s.Count())
			}
			r, ok := s.Last()
			if !ok || r.Method != "POST" || r.Path != "/no/such/route" || r.RawQuery != "a=1&b=two" ||
				r.Query.Get("b") != "two" || r.Header.Get("X-Test") != "yes" || string(r.Body) != `{"x":1}` ||
				r.Status != http.StatusNotFound || !r.Done || r.Cancelled {
				t.Fatalf("recorded %+v", r)
			}
			var v map[string]int
			if err := r.JSON(&v); err != nil || v["x"] != 1 {
				t.Fatalf("JSON: %v %v", v, err)
			}
			s.Reset()
			if s.Count() != 0 || len(s.Requests()) != 0 {
				t.Fatal("reset kept requests")
			}
		})
	}
}

// The 404 bodies are each real server's own.
func TestNotFoundShapes(t *testing.T) {
	cases := []struct {
		kind Kind
		ct   string
		body string
	}{
		{KindOllama, "text/plain", "404 page not found"},
		{KindOpenAI, "application/json; charset=utf-8", `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`},
		{KindComfyUI, "text/plain; charset=utf-8", "404: Not Found"},
		{KindChatterbox, "application/json", `{"detail":"Not Found"}`},
	}
	for _, c := range cases {
		s := Start(t, c.kind)
		res := do(t, "GET", s.URL+"/nope", nil)
		if res.status != 404 || res.header.Get("Content-Type") != c.ct || string(res.body) != c.body {
			t.Errorf("%s: %d %q %q", c.kind, res.status, res.header.Get("Content-Type"), res.body)
		}
	}
}

// Without the credential each kind answers its 401; with it, the request
// goes through.
func TestCredentials(t *testing.T) {
	cases := []struct {
		kind       Kind
		path, body string
		want       string
	}{
		{KindOllama, "/api/tags", "", `{"error":"unauthorized"}`},
		{KindOpenAI, "/props", "", `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`},
		{KindComfyUI, "/queue", "", "401: Unauthorized"},
		{KindChatterbox, "/get_predefined_voices", "", `{"detail":"Not authenticated"}`},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			s := Start(t, c.kind, WithBearer("s3cret"))
			res := do(t, "GET", s.URL+c.path, nil)
			challenge := "Bearer"
			if c.kind == KindOpenAI {
				challenge = "" // llama.cpp sends none
			}
			if res.status != 401 || string(res.body) != c.want || res.header.Get("WWW-Authenticate") != challenge {
				t.Fatalf("no key: %d %q %v", res.status, res.body, res.header)
			}
			res = do(t, "GET", s.URL+c.path, nil, "Authorization", "Bearer wrong")
			if res.status != 401 {
				t.Fatalf("wrong key: %d", res.status)
			}
			res = do(t, "GET", s.URL+c.path, nil, "Authorization", "Bearer s3cret")
			if res.status != 200 {
				t.Fatalf("good key: %d %s", res.status, res.body)
			}
			reqs := s.Requests()
			if len(reqs) != 3 || reqs[0].Status != 401 || reqs[2].Status != 200 {
				t.Fatalf("recorded %+v", reqs)
			}
		})
	}

	b := Start(t, KindChatterbox, WithBasicAuth("u", "p"))
	if res := do(t, "GET", b.URL+"/get_reference_files", nil); res.status != 401 || !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("basic, none: %d %v", res.status, res.header)
	}
	req, _ := http.NewRequest("GET", b.URL+"/get_reference_files", nil)
	req.SetBasicAuth("u", "p")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("basic, good: %d", resp.StatusCode)
	}

	// llama.cpp keeps its public routes open and accepts X-Api-Key.
	o := Start(t, KindOpenAI, WithBearer("k"))
	for _, p := range []string{"/health", "/v1/health", "/models", "/v1/models"} {
		if res := do(t, "GET", o.URL+p, nil); res.status != 200 {
			t.Errorf("public %s: %d", p, res.status)
		}
	}
	if res := do(t, "GET", o.URL+"/slots", nil, "X-Api-Key", "k"); res.status != 200 {
		t.Errorf("X-Api-Key: %d", res.status)
	}
}

func TestHoldReleasesStreams(t *testing.T) {
	o := StartOllama(t, WithTokens(3))
	release := o.Hold()
	req, _ := http.NewRequestWithContext(waitCtx(t), "POST", o.URL+"/api/generate",
		strings.NewReader(`{"model":"llama3.2","prompt":"hi"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, `"response":"The"`) {
		t.Fatalf("first line %q %v", first, err)
	}
	if o.InFlight() != 1 {
		t.Fatalf("in flight %d", o.InFlight())
	}
	release()
	rest, _ := io.ReadAll(br)
	if n := strings.Count(string(rest), "\n"); n != 3 {
		t.Fatalf("after release %d lines: %s", n, rest)
	}
	if err := o.WaitIdle(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if o.Cancelled() != 0 {
		t.Fatalf("cancelled %d", o.Cancelled())
	}
}

func TestTokenDelayStillCompletes(t *testing.T) {
	s := StartOpenAI(t, WithTokens(3), WithTokenDelay(time.Millisecond))
	res := do(t, "POST", s.URL+"/completion", map[string]any{"prompt": "a", "stream": true})
	ev := sseEvents(t, res.body)
	if len(ev) != 4 {
		t.Fatalf("events %d: %s", len(ev), res.body)
	}
}
