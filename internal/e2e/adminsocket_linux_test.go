//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacancyd/vacancyd/internal/testutil/proc"
)

// The running daemon serves its admin socket, and vacancyd admin-request
// reaches the same admin actions as HTTP: a pause over the socket names the
// caller's uid in /status, shows the channel available, and saving settings
// over the socket applies them.
func TestAdminSocketThroughTheDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the admin socket test runs as root (the client must be trusted and an administrator)")
	}
	addr := hostPort(t, "127.0.0.1")
	sockDir := filepath.Join(t.TempDir(), "run")
	sock := filepath.Join(sockDir, "admin.sock")
	d := proc.Start(t, addr, fmt.Sprintf("[server]\nlisten = %q\nadmin_socket = %q\n", addr, sock), nil)
	waitFor(t, "the admin socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})

	request := func(req string) (int, map[string]any) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "req.json")
		if err := os.WriteFile(f, []byte(req), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := runBinary(t, "admin-request", "--socket", sock, "--request", f)
		var ans map[string]any
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &ans); err != nil {
				t.Fatalf("answer is not JSON: %v: %s", err, out)
			}
		}
		return code, ans
	}
	status := func() map[string]any {
		t.Helper()
		r := do(t, "GET", d.API+"/status")
		var st map[string]any
		if err := json.Unmarshal(r.Body, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	if ch := status()["admin_channel"].(map[string]any); ch["state"] != "available" || ch["path"] != sock {
		t.Fatalf("admin_channel = %v", ch)
	}
	code, ans := request(`{"protocol_version": 1, "action": {"kind": "pause"}}`)
	if code != 0 || ans["outcome"] != "lending" || ans["lending_enabled"] != false {
		t.Fatalf("pause over the socket: exit %d, %v", code, ans)
	}
	lending := status()["lending"].(map[string]any)
	if lending["lending_enabled"] != false {
		t.Fatal("/status does not show the socket's pause")
	}
	if by := lending["paused_by"].(map[string]any); by["account"] != "uid:0" || by["via"] != "socket" {
		t.Fatalf("paused_by = %v, want uid:0 via the socket", by)
	}
	code, ans = request(`{"protocol_version": 1, "action": {"kind": "resume"}}`)
	if code != 0 || ans["lending_enabled"] != true {
		t.Fatalf("resume over the socket: exit %d, %v", code, ans)
	}

	// save_settings over the socket: the same contract as HTTP.
	r := do(t, "GET", d.API+"/admin/settings", intent)
	var doc struct {
		Revision string         `json:"revision"`
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Settings["lending"].(map[string]any)["retry_after"] = "45s"
	save, _ := json.Marshal(map[string]any{"protocol_version": 1, "action": map[string]any{"kind": "save_settings", "settings": doc}})
	code, ans = request(string(save))
	if code != 0 || ans["outcome"] != "settings" || ans["revision"] == doc.Revision {
		t.Fatalf("save over the socket: exit %d, %v", code, ans)
	}
	if data, _ := os.ReadFile(d.ConfigPath()); !strings.Contains(string(data), "retry_after = '45s'") {
		t.Fatalf("saved file:\n%s", data)
	}
	// The old revision is now stale: exit code 42.
	if code, _ = request(string(save)); code != 42 {
		t.Fatalf("stale save over the socket: exit %d, want 42", code)
	}
}
