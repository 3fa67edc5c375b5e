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

// vacancyd status reads the running daemon with no setup over loopback and
// says when the admin channel is down; meanwhile loopback reading and
// pausing keep working, and /status carries the reason.
func TestStatusCommandAndUnavailableAdminChannel(t *testing.T) {
	addr := hostPort(t, "127.0.0.1")
	// A directory others may write is refused, so the channel stays down.
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shared, "admin.sock")
	gate := hostPort(t, "127.0.0.1")
	d := proc.Start(t, addr, fmt.Sprintf(`[server]
listen = %q
admin_socket = %q

[[upstream]]
id = "ollama"
listen = %q
target = "http://127.0.0.1:11434"
kind = "ollama"
`, addr, sock, gate), nil)

	code, out := runBinary(t, "status", "--api", d.API)
	if code != 0 {
		t.Fatalf("vacancyd status exit %d: %s", code, out)
	}
	for _, want := range []string{
		"lending:  enabled",
		"resource: gpu0 switched on, not lent: presence_unknown",
		"owner:    unknown (no presence source has reported)",
		"work:     0 running, 0 held",
		"gate:     ollama (ollama) " + gate + " -> http://127.0.0.1:11434 [gpu0]",
		"admin:    channel UNAVAILABLE at " + sock,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("a socket was created in a directory others may write")
	}

	// Loopback pausing still works while the channel is down.
	if r := do(t, "POST", d.API+"/admin/lending/disable", intent); r.Status != 200 {
		t.Fatalf("loopback pause = %d: %s", r.Status, r.Body)
	}
	code, out = runBinary(t, "status", "--api", d.API)
	if code != 0 || !strings.Contains(out, "lending:  PAUSED by an anonymous caller") {
		t.Fatalf("status after pause (exit %d):\n%s", code, out)
	}

	code, out = runBinary(t, "status", "--api", d.API, "--json")
	var st struct {
		AdminChannel struct{ State, Reason, Path string } `json:"admin_channel"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --json (exit %d): %s", code, out)
	}
	if st.AdminChannel.State != "unavailable" || st.AdminChannel.Reason == "" {
		t.Fatalf("admin_channel = %+v, want unavailable with a reason", st.AdminChannel)
	}

	// Diagnostics over loopback (intent header): the effective config, the
	// inputs, and the admin socket's failure among the recent errors.
	r := do(t, "GET", d.API+"/admin/diagnostics", intent)
	var diag struct {
		Config struct {
			Server struct {
				AdminSocket string `json:"admin_socket"`
			} `json:"server"`
		} `json:"config"`
		Inputs struct {
			AdminChannel struct{ State string } `json:"admin_channel"`
		} `json:"inputs"`
		RecentErrors []struct{ Level, Message string } `json:"recent_errors"`
		Build        struct {
			GoVersion string `json:"go_version"`
		} `json:"build"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &diag) != nil {
		t.Fatalf("diagnostics: %d %s", r.Status, r.Body)
	}
	if diag.Config.Server.AdminSocket != sock || diag.Inputs.AdminChannel.State != "unavailable" || diag.Build.GoVersion == "" {
		t.Fatalf("diagnostics document: %s", r.Body)
	}
	if len(diag.RecentErrors) == 0 {
		t.Fatalf("no recent errors while the admin socket fails: %s", r.Body)
	}

	// Nothing listens: exit 44 with a reason.
	if code, out := runBinary(t, "status", "--api", "http://"+hostPort(t, "127.0.0.1")); code != 44 || !strings.Contains(out, "cannot reach vacancyd") {
		t.Fatalf("status against nothing: exit %d: %s", code, out)
	}
}
