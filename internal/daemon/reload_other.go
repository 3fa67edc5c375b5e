//go:build !unix

package daemon

import "os"

// notifyReload: Windows has no SIGHUP; settings change through the API.
func notifyReload() (<-chan os.Signal, func()) { return nil, func() {} }
