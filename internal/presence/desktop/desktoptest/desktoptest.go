// Package desktoptest runs real desktop services for the session
// reporter's tests: a private D-Bus bus (Debian's dbus-daemon) carrying
// fakes of the desktop's D-Bus services (GNOME Mutter's IdleMonitor,
// org.freedesktop.ScreenSaver, logind, GNOME's session manager), and an
// X server (Debian's Xvfb) with the real MIT-SCREEN-SAVER and XTEST
// extensions.
//
// Where a tool is missing the test is skipped with the package to install,
// unless VACANCYD_REQUIRE_TOOLS=1 (set by scripts/test), which makes it a
// failure.
package desktoptest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// hang only stops a stuck helper from hanging the suite.
const hang = 30 * time.Second

// NeedTool returns the path of a tool, or skips the test (fails it under
// VACANCYD_REQUIRE_TOOLS=1) naming the Debian package that has it.
func NeedTool(t testing.TB, tool, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	if os.Getenv("VACANCYD_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is not installed and VACANCYD_REQUIRE_TOOLS=1: install the Debian package %s", tool, debianPackage)
	}
	t.Skipf("%s is not installed: install the Debian package %s to run this test", tool, debianPackage)
	return ""
}

// busConfig is a bus any local account may use, on an abstract socket
// (which has no file permissions to get in the way).
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:abstract=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// StartBus runs a private dbus-daemon for the test and returns its address.
// Every local account may connect to it.
func StartBus(t testing.TB) string {
	t.Helper()
	daemon := NeedTool(t, "dbus-daemon", "dbus-daemon")
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "bus.conf")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, busConfig, "vacancyd-test-"+hex.EncodeToString(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+cfg, "--nofork", "--nopidfile", "--nosyslog", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatalf("dbus-daemon printed no address: %s", stderr.String())
		}
		return a
	case <-time.After(hang):
		t.Fatalf("dbus-daemon did not start: %s", stderr.String())
	}
	return ""
}

// Connect connects to the bus at addr for the test.
func Connect(t testing.TB, addr string) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// own connects to the bus and takes name.
func own(t testing.TB, addr, name string) *dbus.Conn {
	t.Helper()
	c := Connect(t, addr)
	reply, err := c.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("take the bus name %s: %v (reply %v)", name, err, reply)
	}
	return c
}

func export(t testing.TB, c *dbus.Conn, path dbus.ObjectPath, iface string, methods map[string]any) {
	t.Helper()
	if err := c.ExportMethodTable(methods, path, iface); err != nil {
		t.Fatal(err)
	}
}
