// Package browser runs a real headless Chromium for the tests of vacancyd's
// browser rules (DNS rebinding, cross-site forms, CORS preflights). It drives
// Debian's chromium through the DevTools protocol (chromedp). Where chromium
// is not installed the test is skipped with the reason, unless
// VACANCYD_REQUIRE_TOOLS=1 (set by scripts/test), which makes it a failure.
package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path finds the Chromium binary.
func Path() string {
	for _, p := range []string{os.Getenv("VACANCYD_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// New starts a headless Chromium for the test and returns a browser context.
// hostRules, when set, is passed as --host-resolver-rules (e.g.
// "MAP rebind.test 127.0.0.1") so made-up names resolve to loopback.
func New(t testing.TB, hostRules string) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		if os.Getenv("VACANCYD_REQUIRE_TOOLS") == "1" {
			t.Fatal("browser: chromium is not installed (scripts/test installs Debian's chromium)")
		}
		t.Skip("browser: chromium is not installed; run ./scripts/test to install it")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	if hostRules != "" {
		opts = append(opts, chromedp.Flag("host-resolver-rules", hostRules))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; its context must carry no timeout.
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("browser: start chromium: %v", err)
	}
	return ctx
}

// Eval navigates to url and evaluates a JavaScript expression there, awaiting
// it if it is a promise, and returns its JSON-decoded result.
func Eval[T any](ctx context.Context, url, expr string) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		return zero, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}
