package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// creds are the credentials an upstream may require; each test that talks
// to a fake runs under both.
var creds = map[string]struct {
	opt  fakeupstream.Option
	cred *config.Credential
}{
	"bearer": {fakeupstream.WithBearer("tok-123"), &config.Credential{Scheme: "bearer", Secret: config.NewSecret("tok-123")}},
	"basic": {fakeupstream.WithBasicAuth("owner", "pw-456"),
		&config.Credential{Scheme: "basic", Username: "owner", Secret: config.NewSecret("pw-456")}},
}

func upstreamOf(t *testing.T, url string, cred *config.Credential) adapter.Upstream {
	t.Helper()
	u, err := adapter.NewUpstream(config.Upstream{ID: "llm", Kind: config.KindOllama, Target: url, Credential: cred}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// generate posts to the fake as a borrower would (through the gate, which
// presents the credential), and returns the open response.
func generate(t *testing.T, u adapter.Upstream, body map[string]any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", u.Target.String()+"/api/generate", bytes.NewReader(b))
	req.Header.Set("Authorization", u.Authorization.Reveal())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("generate: %d", res.StatusCode)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func names(ms []fakeupstream.LoadedModel) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// TestUnloadFreesABorrowedModel: a model a borrower loaded is unloaded by
// keep_alive 0 with no prompt, /api/ps agrees, and every call vacancyd made
// presented the upstream credential.
func TestUnloadFreesABorrowedModel(t *testing.T) {
	for name, c := range creds {
		t.Run(name, func(t *testing.T) {
			f := fakeupstream.StartOllama(t, c.opt)
			u := upstreamOf(t, f.URL, c.cred)
			r := Reclaimer{}
			generate(t, u, map[string]any{"model": "llama3.2", "prompt": "hi", "stream": false})
			if got := names(f.Loaded()); !slices.Equal(got, []string{"llama3.2:latest"}) {
				t.Fatalf("fake loaded %v", got)
			}
			loaded, err := r.Loaded(waitCtx(t), u)
			if err != nil || !slices.Equal(loaded, []string{"llama3.2:latest"}) {
				t.Fatalf("Loaded = %v, %v", loaded, err)
			}
			if still, err := adapter.StillLoaded(waitCtx(t), r, u, []string{"llama3.2"}); err != nil || !slices.Equal(still, []string{"llama3.2"}) {
				t.Fatalf("StillLoaded before unload = %v, %v", still, err)
			}
			f.Reset()

			if err := r.Unload(waitCtx(t), u, []string{"llama3.2", "llama3.2:latest"}); err != nil {
				t.Fatal(err)
			}
			if got := f.Loaded(); len(got) != 0 {
				t.Fatalf("fake still has %v", names(got))
			}
			if still, err := adapter.WaitUnloaded(waitCtx(t), r, u, []string{"llama3.2"}); err != nil || still != nil {
				t.Fatalf("WaitUnloaded = %v, %v", still, err)
			}

			reqs := f.Requests()
			unloads := f.RequestsTo("/api/generate")
			if len(unloads) != 1 {
				t.Fatalf("%d unload requests for one model named twice", len(unloads))
			}
			var body map[string]any
			if err := unloads[0].JSON(&body); err != nil || body["model"] != "llama3.2" || body["keep_alive"] != float64(0) || body["prompt"] != nil {
				t.Errorf("unload body %s", unloads[0].Body)
			}
			for _, rec := range reqs {
				if rec.Header.Get("Authorization") != u.Authorization.Reveal() || rec.Status != http.StatusOK {
					t.Errorf("%s %s: status %d, credential %q", rec.Method, rec.Path, rec.Status, rec.Header.Get("Authorization"))
				}
			}
		})
	}
}

// TestUnloadOfABusyModelLandsWhenItsRequestEnds: Ollama unloads a model in
// use once its requests end; until then Loaded still lists it, which is
// what confirmation must see.
func TestUnloadOfABusyModelLandsWhenItsRequestEnds(t *testing.T) {
	c := creds["bearer"]
	f := fakeupstream.StartOllama(t, c.opt, fakeupstream.WithTokens(3))
	release := f.Hold()
	t.Cleanup(release)
	u := upstreamOf(t, f.URL, c.cred)
	r := Reclaimer{}

	res := generate(t, u, map[string]any{"model": "llama3.2", "prompt": "hi"})
	lines := bufio.NewScanner(res.Body)
	if !lines.Scan() {
		t.Fatal("no first token")
	}
	if err := r.Unload(waitCtx(t), u, []string{"llama3.2"}); err != nil {
		t.Fatal(err)
	}
	if still, err := adapter.StillLoaded(waitCtx(t), r, u, []string{"llama3.2"}); err != nil || !slices.Equal(still, []string{"llama3.2"}) {
		t.Fatalf("a busy model vanished: %v, %v", still, err)
	}
	release()
	for lines.Scan() {
	}
	if still, err := adapter.WaitUnloaded(waitCtx(t), r, u, []string{"llama3.2"}); err != nil || still != nil {
		t.Fatalf("after the request ended: %v, %v", still, err)
	}
}

// TestUnloadErrors: Ollama answers 404 for a model it
// does not have; there is nothing to unload. A refused credential is an
// error that does not show the credential.
func TestUnloadErrors(t *testing.T) {
	c := creds["bearer"]
	f := fakeupstream.StartOllama(t, c.opt)
	u := upstreamOf(t, f.URL, c.cred)
	r := Reclaimer{}
	if err := r.Unload(waitCtx(t), u, []string{"no-such-model", ""}); err != nil {
		t.Fatalf("unknown model: %v", err)
	}
	if err := r.Unload(waitCtx(t), u, nil); err != nil || len(f.RequestsTo("/api/generate")) != 1 {
		t.Fatalf("no models: %v, %d requests", err, len(f.RequestsTo("/api/generate")))
	}

	wrong := upstreamOf(t, f.URL, &config.Credential{Scheme: "bearer", Secret: config.NewSecret("wrong-secret")})
	err := r.Unload(waitCtx(t), wrong, []string{"llama3.2"})
	if adapter.StatusCode(err) != http.StatusUnauthorized || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("refused credential: %v", err)
	}
	if _, err := r.Loaded(waitCtx(t), wrong); adapter.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("Loaded with a refused credential: %v", err)
	}
}

// TestJobsAreUnsupported: Ollama work ends with its request.
func TestJobsAreUnsupported(t *testing.T) {
	r, err := adapter.ReclaimerFor(config.KindOllama)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CancelJob(context.Background(), adapter.Upstream{}, "x"); !errors.Is(err, adapter.ErrUnsupported) {
		t.Errorf("CancelJob: %v", err)
	}
	if _, err := r.JobDone(context.Background(), adapter.Upstream{}, "x"); !errors.Is(err, adapter.ErrUnsupported) {
		t.Errorf("JobDone: %v", err)
	}
}

// TestSameModelFollowsOllamaNames: names are compared the way Ollama fills
// in host, namespace and tag.
func TestSameModelFollowsOllamaNames(t *testing.T) {
	r := Reclaimer{}
	for _, c := range []struct {
		listed, named string
		want          bool
	}{
		{"llama3.2:latest", "llama3.2", true},
		{"llama3.2:latest", "library/llama3.2", true},
		{"llama3.2:latest", "registry.ollama.ai/library/llama3.2:latest", true},
		{"llama3.2:latest", "LLaMA3.2:Latest", true},
		{"llama3.2:latest", "llama3.2@sha256:abc", true},
		{"llama3.2:1b", "llama3.2", false},
		{"user/model:latest", "model", false},
		{"user/model:latest", "user/model", true},
		{"example.com:5000/ns/model:v1", "example.com:5000/ns/model:v1", true},
		{"example.com:5000/ns/model:latest", "example.com:5000/ns/model", true},
		{"", "", false},
		{"llama3.2:latest", ":latest", false},
		{"llama3.2:latest", "llama3.2:", false},
		{"a b", "A B", true},
	} {
		if got := r.SameModel(c.listed, c.named); got != c.want {
			t.Errorf("SameModel(%q, %q) = %v (%q vs %q)", c.listed, c.named, got, CanonicalModel(c.listed), CanonicalModel(c.named))
		}
	}
}

// FuzzCanonicalModel: any name a borrower sends canonicalises without
// panicking, canonical names are fixed points, and SameModel is symmetric.
func FuzzCanonicalModel(f *testing.F) {
	for _, s := range []string{"llama3.2", "llama3.2:1b", "user/m:tag", "example.com:5000/ns/m:v1", "a/b/c/d", "m@sha256:00", "https://h/n/m:t", ":", "/", "@", "", "0: @", ":// //0"} {
		f.Add(s, "llama3.2:latest")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c := CanonicalModel(a)
		if CanonicalModel(c) != c {
			t.Errorf("CanonicalModel(%q) = %q, whose canonical form is %q", a, c, CanonicalModel(c))
		}
		r := Reclaimer{}
		if r.SameModel(a, b) != r.SameModel(b, a) {
			t.Errorf("SameModel(%q, %q) is not symmetric", a, b)
		}
	})
}
