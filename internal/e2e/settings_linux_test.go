//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// settingsDaemon runs vacancyd with loopback trust off and one operator
// token, so that every request below is judged by tokens alone.
func settingsDaemon(t *testing.T) (*proc.Daemon, string) {
	t.Helper()
	op := newToken(t)
	addr := hostPort(t, "127.0.0.1")
	d := proc.Start(t, addr, fmt.Sprintf(`[server]
listen = %q

[auth]
trust_loopback = false

[[auth.token]]
name = "operator"
scopes = ["read", "admin"]
value_file = "secrets/operator.token"
`, addr), map[string]string{"secrets/operator.token": op + "\n"})
	return d, op
}

func getSettings(t *testing.T, d *proc.Daemon, op string) (rev string, settings map[string]any) {
	t.Helper()
	r := do(t, "GET", d.API+"/admin/settings", intent, bearer(op))
	if r.Status != 200 {
		t.Fatalf("GET /admin/settings = %d: %s", r.Status, r.Body)
	}
	var doc struct {
		Revision string         `json:"revision"`
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Revision, doc.Settings
}

func postSettings(t *testing.T, d *proc.Daemon, op, rev string, settings map[string]any) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"revision": rev, "settings": settings})
	req, _ := http.NewRequest("POST", d.API+"/admin/settings", bytes.NewReader(body))
	req.Header.Set("X-Vacancyd-Admin", "1")
	req.Header.Set("Authorization", "Bearer "+op)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}
}

func addToken(settings map[string]any, name, file string) {
	a := settings["auth"].(map[string]any)
	a["token"] = append(a["token"].([]any), map[string]any{"name": name, "scopes": []any{"read"}, "value_file": file})
}

// A saved change applies at once: a token added through the settings API
// reads /status on the next request, with no restart; the file on disk is
// the new settings.
func TestSettingsSaveAppliesLive(t *testing.T) {
	d, op := settingsDaemon(t)
	reader := newToken(t)
	if err := os.WriteFile(d.Dir+"/secrets/reader.token", []byte(reader), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "GET", d.API+"/status", bearer(reader)); r.Status != 401 {
		t.Fatalf("unknown token read /status: %d", r.Status)
	}
	rev, s := getSettings(t, d, op)
	addToken(s, "reader", "secrets/reader.token")
	r := postSettings(t, d, op, rev, s)
	if r.Status != 200 {
		t.Fatalf("save = %d: %s", r.Status, r.Body)
	}
	var res struct {
		Revision        string   `json:"revision"`
		Applied         []string `json:"applied"`
		RestartRequired []string `json:"restart_required"`
	}
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Revision == rev || len(res.RestartRequired) != 0 || !strings.Contains(strings.Join(res.Applied, ","), "auth") {
		t.Fatalf("save answer %+v", res)
	}
	if r := do(t, "GET", d.API+"/status", bearer(reader)); r.Status != 200 {
		t.Fatalf("the saved token does not read /status: %d %s", r.Status, r.Body)
	}
	if cfg, _, err := config.Load(d.ConfigPath(), config.Options{UnitFiles: []string{}}); err != nil || len(cfg.Auth.Tokens) != 2 {
		t.Fatalf("saved file: %v", err)
	}
	// The listener cannot move while running: saying so is part of the answer.
	rev2, s := getSettings(t, d, op)
	s["server"].(map[string]any)["listen"] = hostPort(t, "127.0.0.1")
	r = postSettings(t, d, op, rev2, s)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"server.listen"`) {
		t.Fatalf("moving the listener: %d %s", r.Status, r.Body)
	}
	// Until the restart, every later save still says so; so do startup
	// states that the running switches, not the file, govern.
	rev3, s := getSettings(t, d, op)
	s["lending"].(map[string]any)["enabled"] = false
	r = postSettings(t, d, op, rev3, s)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"server.listen"`) || !strings.Contains(string(r.Body), `lending.enabled`) {
		t.Fatalf("a later save forgot what still needs a restart: %d %s", r.Status, r.Body)
	}
	if !lendingEnabled(t, d.API, bearer(op)) {
		t.Fatal("saving lending.enabled = false paused the running daemon")
	}
	assertNoSecrets(t, d, op, reader)
}

// A stale revision gets 409 and an invalid document 422 with every problem;
// neither changes a byte of the file.
func TestSettingsRefusalsChangeNothing(t *testing.T) {
	d, op := settingsDaemon(t)
	before, _ := os.ReadFile(d.ConfigPath())
	rev, s := getSettings(t, d, op)

	stale := postSettings(t, d, op, "0123456789abcdef01234567", s)
	if stale.Status != 409 || stale.errorBody(t).Error.Type != "stale_revision" {
		t.Fatalf("stale revision: %d %s", stale.Status, stale.Body)
	}

	s["server"].(map[string]any)["listen"] = "0.0.0.0:99999"
	s["lending"].(map[string]any)["idle_after"] = "soon"
	addToken(s, "ghost", "secrets/missing.token")
	bad := postSettings(t, d, op, rev, s)
	if bad.Status != 422 {
		t.Fatalf("invalid settings: %d %s", bad.Status, bad.Body)
	}
	var body struct {
		Error struct {
			Type     string `json:"type"`
			Problems []struct{ Key, Message string }
		} `json:"error"`
	}
	if err := json.Unmarshal(bad.Body, &body); err != nil || body.Error.Type != "invalid_settings" {
		t.Fatalf("422 body: %v %s", err, bad.Body)
	}
	keys := map[string]bool{}
	for _, p := range body.Error.Problems {
		keys[p.Key] = true
	}
	for _, k := range []string{"server.listen", "lending.idle_after", "auth.token[1].value_file"} {
		if !keys[k] {
			t.Errorf("problem at %s not reported: %s", k, bad.Body)
		}
	}
	after, _ := os.ReadFile(d.ConfigPath())
	if !bytes.Equal(before, after) {
		t.Fatal("a refused save changed the file")
	}
	if r, _ := getSettings(t, d, op); r != rev {
		t.Fatal("the revision moved after refused saves")
	}
}

// SIGHUP re-reads the file: a good file applies, a bad one changes nothing
// and the daemon keeps serving with what it had.
func TestSighupReload(t *testing.T) {
	d, op := settingsDaemon(t)
	reader := newToken(t)
	orig, _ := os.ReadFile(d.ConfigPath())
	added := string(orig) + "\n[[auth.token]]\nname = \"reader\"\nscopes = [\"read\"]\nvalue_file = \"secrets/reader.token\"\n"
	if err := os.WriteFile(d.Dir+"/secrets/reader.token", []byte(reader), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.ConfigPath(), []byte(added), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reloaded token to read /status", func() bool {
		return do(t, "GET", d.API+"/status", bearer(reader)).Status == 200
	})
	if err := os.WriteFile(d.ConfigPath(), []byte(added+"\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused reload to be logged", func() bool {
		return strings.Contains(d.Log.String(), "reload refused")
	})
	if r := do(t, "GET", d.API+"/status", bearer(reader)); r.Status != 200 {
		t.Fatalf("a refused reload dropped the running settings: %d", r.Status)
	}
	if r := do(t, "GET", d.API+"/status", bearer(op)); r.Status != 200 {
		t.Fatalf("operator lost access after a refused reload: %d", r.Status)
	}
}

// Crash safety: the daemon is killed with SIGKILL while it saves in a loop;
// the file on disk always loads and is one of the documents it saved.
func TestSettingsSurviveKillDuringSave(t *testing.T) {
	for round := range 4 {
		d, op := settingsDaemon(t)
		orig, _ := os.ReadFile(d.ConfigPath())
		posted := make(chan int, 1<<16)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				posted <- 10 + i
				rev, s := getSettingsQuiet(d, op)
				if s == nil {
					return
				}
				s["lending"].(map[string]any)["retry_after"] = fmt.Sprintf("%ds", 10+i)
				if !postQuiet(d, op, rev, s) {
					return
				}
			}
		}()
		// Let a few saves land, then crash at an arbitrary point.
		waitFor(t, "saves to happen", func() bool {
			return strings.Count(d.Log.String(), "settings saved") >= 3+round
		})
		d.Kill()
		<-done
		data, err := os.ReadFile(d.ConfigPath())
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Parse(data, d.ConfigPath(), config.Options{UnitFiles: []string{}})
		if err != nil {
			t.Fatalf("round %d: the file does not load after a crash: %v\n%s", round, err, data)
		}
		close(posted)
		sent := map[time.Duration]bool{}
		for s := range posted {
			sent[time.Duration(s)*time.Second] = true
		}
		if !bytes.Equal(data, orig) && !sent[cfg.Lending.RetryAfter.Duration] {
			t.Fatalf("round %d: the file is neither the original nor a document the test saved (retry_after %v):\n%s", round, cfg.Lending.RetryAfter, data)
		}
	}
}

func getSettingsQuiet(d *proc.Daemon, op string) (string, map[string]any) {
	req, _ := http.NewRequest("GET", d.API+"/admin/settings", nil)
	req.Header.Set("X-Vacancyd-Admin", "1")
	req.Header.Set("Authorization", "Bearer "+op)
	resp, err := client.Do(req)
	if err != nil {
		return "", nil
	}
	defer resp.Body.Close()
	var doc struct {
		Revision string         `json:"revision"`
		Settings map[string]any `json:"settings"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return "", nil
	}
	return doc.Revision, doc.Settings
}

func postQuiet(d *proc.Daemon, op, rev string, s map[string]any) bool {
	body, _ := json.Marshal(map[string]any{"revision": rev, "settings": s})
	req, _ := http.NewRequest("POST", d.API+"/admin/settings", bytes.NewReader(body))
	req.Header.Set("X-Vacancyd-Admin", "1")
	req.Header.Set("Authorization", "Bearer "+op)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// waitFor polls cond until it holds, failing the test after a generous bound
// (a guard against hanging, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
