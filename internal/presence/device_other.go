//go:build !linux

package presence

import "os"

// openDevice opens an input device for reading. evdev is Linux only; other
// systems have no devices matching the default glob.
func openDevice(path string) (*os.File, error) { return os.Open(path) }

func skipDevice(*os.File) string { return "" }
