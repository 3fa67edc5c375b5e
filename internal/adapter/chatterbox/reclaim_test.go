package chatterbox

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/fakeupstream"
)

// TestObserveButNeverUnloadTheOwnersModel: Loaded reports the server's one
// model (and nothing once it is unloaded); Unload refuses as unsupported
// and leaves the model loaded; jobs are unsupported.
func TestObserveButNeverUnloadTheOwnersModel(t *testing.T) {
	f := fakeupstream.StartChatterbox(t, fakeupstream.WithBasicAuth("owner", "pw"))
	u, err := adapter.NewUpstream(config.Upstream{ID: "tts", Kind: config.KindChatterbox, Target: f.URL,
		Credential: &config.Credential{Scheme: "basic", Username: "owner", Secret: config.NewSecret("pw")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := Reclaimer{}

	loaded, err := r.Loaded(ctx, u)
	if err != nil || !slices.Equal(loaded, []string{"ChatterboxTurboTTS"}) {
		t.Fatalf("Loaded = %v, %v", loaded, err)
	}
	if !r.SameModel(loaded[0], "tts-1") {
		t.Error("the one model is every request's model")
	}
	if err := r.Unload(ctx, u, []string{"tts-1"}); !errors.Is(err, adapter.ErrUnsupported) {
		t.Fatalf("Unload: %v", err)
	}
	if !f.Loaded() || len(f.RequestsTo("/api/unload")) != 0 {
		t.Fatal("Unload unloaded the owner's model")
	}
	for _, rec := range f.Requests() {
		if rec.Status != http.StatusOK || rec.Header.Get("Authorization") != u.Authorization.Reveal() {
			t.Errorf("%s %s: %d %q", rec.Method, rec.Path, rec.Status, rec.Header.Get("Authorization"))
		}
	}

	// The owner unloads it: nothing is loaded any more.
	req, _ := http.NewRequest("POST", f.URL+"/api/unload", nil)
	req.SetBasicAuth("owner", "pw")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if loaded, err := r.Loaded(ctx, u); err != nil || len(loaded) != 0 {
		t.Fatalf("after the owner's unload: %v, %v", loaded, err)
	}

	if _, err := r.CancelJob(ctx, u, "x"); !errors.Is(err, adapter.ErrUnsupported) {
		t.Errorf("CancelJob: %v", err)
	}
	if _, err := r.JobDone(ctx, u, "x"); !errors.Is(err, adapter.ErrUnsupported) {
		t.Errorf("JobDone: %v", err)
	}
}
