// Package e2e holds vacancyd's end-to-end tests of the authentication rules:
// the real vacancyd binary (internal/testutil/proc) called by real clients.
//
//   - LAN callers: curl run inside a network namespace joined to the host by a
//     veth pair (internal/testutil/netns), so the daemon sees a 10.x peer, not
//     loopback: tokens by both headers, scopes, allowed_sources,
//     allow_unauthenticated_remote, and check-config's refusal of an exposed
//     listener with no token.
//   - Loopback operator: curl on 127.0.0.1, the seed's pause example and the
//     Linux limit on what loopback trust may change.
//   - A real browser: headless Chromium (internal/testutil/browser) for DNS
//     rebinding, cross-site form posts, cross-origin fetches with the admin
//     intent header, and what a local origin may and may not read.
//
// The tests build only on Linux: the namespace harness, Debian's chromium and
// the loopback admin policy they assert (pause only) are Linux's. Every test
// asserts both the answer the client saw and what vacancyd recorded
// (vacancyd_auth_total and its log), and none asserts a duration.
package e2e
