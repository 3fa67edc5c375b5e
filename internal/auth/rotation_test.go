package auth

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/config"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// writeAtomic replaces path's content the way an operator's tooling should:
// a temporary file renamed over it.
func writeAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// fileTokenAuth builds an Authenticator with an inline "reader" token and a
// value_file token "rot" loaded from path, as config.Load would.
func fileTokenAuth(t testing.TB, path string, trustLoopback bool, clock *fakeClock) (*Authenticator, *syncBuffer) {
	t.Helper()
	secret, err := config.ReadSecretFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Auth{TrustLoopback: trustLoopback, Tokens: []config.Token{
		tok("reader", readerValue, "read"),
		{Name: "rot", Scopes: []string{"borrow"}, ValueFile: path, FilePath: path, Secret: secret},
	}}
	logs := &syncBuffer{}
	a, err := New(cfg, Options{
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: prometheus.NewRegistry(),
		GOOS:       "linux",
		Now:        clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, logs
}

// judgeRemote authorizes a borrow request from a remote peer presenting key.
func judgeRemote(a *Authenticator, key string, scope Scope) (Principal, string) {
	r := httptest.NewRequest(http.MethodPost, "/api/generate", nil)
	r.RemoteAddr = "10.1.2.3:40000"
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	p, herr := a.Authorize(r, Requirement{Scope: scope})
	if herr != nil {
		return p, herr.Type
	}
	return p, string(OutcomeAllowed)
}

// TestRotation walks a value_file token through rotation, a missing file, an
// empty file, a malformed token and recovery, checking that each change is
// seen on the first use a second or more after the last check (not before),
// that problems disable only that token, are logged once each, and that no
// secret reaches the log.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rot.token")
	const (
		keyA = "rotation-key-A-0123456789abcdefghijklmnop"
		keyB = "rotation-key-B-0123456789abcdefghijklmnop"
		keyC = "rotation-key-C-0123456789abcdefghijklmnop"
	)
	writeAtomic(t, path, keyA+"\n")
	clock := newFakeClock()
	a, logs := fileTokenAuth(t, path, true, clock)

	expect := func(step, key string, want string) {
		t.Helper()
		if _, got := judgeRemote(a, key, Borrow); got != want {
			t.Errorf("%s: key %s… judged %s, want %s", step, key[:15], got, want)
		}
	}
	expect("start", keyA, "allowed")
	expect("start", keyB, "invalid")

	writeAtomic(t, path, keyB+"\n")
	clock.Add(500 * time.Millisecond)
	expect("within a second of the last check, the old key still works", keyA, "allowed")
	expect("within a second of the last check, the new key is not yet read", keyB, "invalid")
	clock.Add(600 * time.Millisecond)
	expect("rotated: new key", keyB, "allowed")
	expect("rotated: old key revoked", keyA, "invalid")
	if n := strings.Count(logs.String(), "token rotated"); n != 1 {
		t.Errorf("rotation logged %d times, want once", n)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clock.Add(2 * time.Second)
		expect("file missing: fail closed", keyB, "invalid")
	}
	if _, got := judgeRemote(a, readerValue, Read); got != "allowed" {
		t.Errorf("a broken token file disabled the inline token too: %s", got)
	}
	if p := a.Posture(); p.Tokens[1].Active || !p.Tokens[0].Active {
		t.Errorf("posture while the file is missing: %+v", p.Tokens)
	}
	if n := strings.Count(logs.String(), "token disabled"); n != 1 {
		t.Errorf("missing file logged %d times, want once", n)
	}

	writeAtomic(t, path, "\n\n")
	for range 3 {
		clock.Add(2 * time.Second)
		expect("file empty: fail closed", keyB, "invalid")
	}
	if n := strings.Count(logs.String(), "token disabled"); n != 2 {
		t.Errorf("after a second distinct problem, %d disabled lines, want 2", n)
	}

	writeAtomic(t, path, keyC)
	clock.Add(2 * time.Second)
	expect("good again", keyC, "allowed")
	if !strings.Contains(logs.String(), "token enabled again") {
		t.Error("recovery was not logged")
	}

	writeAtomic(t, path, "not a token")
	clock.Add(2 * time.Second)
	expect("malformed token in file: fail closed", keyC, "invalid")
	if n := strings.Count(logs.String(), "token disabled"); n != 3 {
		t.Errorf("malformed token: %d disabled lines, want 3", n)
	}

	writeAtomic(t, path, keyA)
	clock.Add(2 * time.Second)
	expect("back to A", keyA, "allowed")

	log := logs.String()
	for _, k := range []string{keyA, keyB, keyC, readerValue} {
		if strings.Contains(log, k) {
			t.Errorf("the log contains a secret")
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.Contains(line, "token disabled") || strings.Contains(line, "rotated") || strings.Contains(line, "enabled again") {
			if !strings.Contains(line, "token=rot") || !strings.Contains(line, "path="+path) {
				t.Errorf("token file log line lacks the token name or path: %s", line)
			}
		}
	}
}

// TestRefreshForcesACheck: Refresh reads the files whatever the clock says.
func TestRefreshForcesACheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rot.token")
	writeAtomic(t, path, "refresh-key-A-0123456789abcdefghijklmnop")
	clock := newFakeClock()
	a, _ := fileTokenAuth(t, path, true, clock)
	writeAtomic(t, path, "refresh-key-B-0123456789abcdefghijklmnop")
	a.Refresh()
	if _, got := judgeRemote(a, "refresh-key-B-0123456789abcdefghijklmnop", Borrow); got != "allowed" {
		t.Errorf("after Refresh the new key is %s", got)
	}
}

// TestRotationRace: requests over real connections race a key file that is
// rewritten again and again, under -race.
//
// The writer rotates through keys K1..Kn. Each rotation opens a "rotating"
// window (odd epoch), writes the file, moves the clock past the check floor,
// and closes the window (even epoch) once a probe with the new key succeeds.
// Readers send the current or the previous key. A request whose whole life
// fell inside one stable window must be judged by that window's key: the
// current key admitted, the previous one refused. A request that overlapped
// a rotation may go either way but must be a clean 200 or 401. Meanwhile a
// sampler reads every published snapshot and checks that the rotating token
// is always active with one of the keys written, never disabled or unknown:
// old or new, never neither. Finally each rotation is logged once and no key
// appears in the log.
func TestRotationRace(t *testing.T) {
	const rotations = 25
	keys := make([]string, rotations+1)
	digests := map[digest]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("race-key-%02d-0123456789abcdefghijklmnopqrstu", i)
		digests[sha256.Sum256([]byte(keys[i]))] = true
	}
	path := filepath.Join(t.TempDir(), "rot.token")
	writeAtomic(t, path, keys[0]+"\n")
	clock := newFakeClock()
	// trust_loopback off: loopback callers need a token, so real loopback
	// connections exercise the token path.
	a, logs := fileTokenAuth(t, path, false, clock)
	srv := httptest.NewServer(a.Require(Requirement{Scope: Borrow}, echoPrincipal))
	defer srv.Close()
	client := srv.Client()

	call := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("request: %v", err)
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	var (
		epoch   atomic.Int64 // odd while a rotation is in progress
		current atomic.Int64 // index of the key in force during even epochs
		stable  atomic.Int64 // requests judged entirely within a stable window
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	defer stop()

	wg.Add(1)
	go func() { // sampler
		defer wg.Done()
		samples := 0
		for {
			select {
			case <-done:
				if samples == 0 {
					t.Error("sampler saw no snapshot")
				}
				return
			default:
			}
			s := a.cur.Load()
			rot := s.tokens[1]
			if !rot.active || !digests[rot.digest] {
				t.Errorf("a published snapshot has the rotating token active=%v with an unknown digest: neither old nor new key", rot.active)
				return
			}
			samples++
			runtime.Gosched()
		}
	}()

	for r := range 4 {
		wg.Add(1)
		go func() { // reader
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				e1 := epoch.Load()
				if e1%2 == 1 {
					runtime.Gosched()
					continue
				}
				i := int(current.Load())
				useOld := i > 0 && (n+r)%3 == 0
				key := keys[i]
				if useOld {
					key = keys[i-1]
				}
				status := call(key)
				if status != http.StatusOK && status != http.StatusUnauthorized {
					t.Errorf("status %d", status)
					return
				}
				if epoch.Load() != e1 {
					continue // overlapped a rotation: either answer is legitimate
				}
				stable.Add(1)
				switch {
				case !useOld && status != http.StatusOK:
					t.Errorf("key %d refused while it was the only key in the file", i)
					return
				case useOld && status != http.StatusUnauthorized:
					t.Errorf("key %d still admitted after key %d replaced it", i-1, i)
					return
				}
			}
		}()
	}

	for i := 1; i <= rotations && !t.Failed(); i++ {
		epoch.Add(1)
		writeAtomic(t, path, keys[i]+"\n")
		current.Store(int64(i))
		clock.Add(1100 * time.Millisecond)
		for tries := 0; call(keys[i]) != http.StatusOK; tries++ {
			if tries == 20 {
				t.Fatalf("key %d never took effect", i)
			}
			clock.Add(1100 * time.Millisecond)
		}
		epoch.Add(1)
		// Let the readers judge a few requests in this stable window.
		want := stable.Load() + 8
		deadline := time.Now().Add(20 * time.Second)
		for stable.Load() < want && !t.Failed() {
			if time.Now().After(deadline) {
				t.Fatal("readers made no progress")
			}
			runtime.Gosched()
		}
	}
	stop()

	log := logs.String()
	if n := strings.Count(log, "token rotated"); n != rotations && !t.Failed() {
		t.Errorf("%d rotations logged, want %d", n, rotations)
	}
	for _, k := range keys {
		if strings.Contains(log, k) {
			t.Fatal("a key reached the log")
		}
	}
	t.Logf("%d requests judged within stable windows", stable.Load())
}
