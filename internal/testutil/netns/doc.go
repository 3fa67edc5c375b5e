// Package netns gives tests a real non-loopback peer: a network namespace
// joined to the host by a veth pair with addresses in 10.0.0.0/8. Commands run
// inside the namespace (curl, the test binary) connect from the namespace's
// address, so the daemon sees a LAN caller. It needs root and iproute2; where
// either is missing, New skips the test with the reason.
package netns
