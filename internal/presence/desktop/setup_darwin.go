//go:build darwin

package desktop

import (
	"context"
	"os/exec"
)

// Default returns macOS's idle source, the HID system's idle time read with
// ioreg, and its inhibitor checker, pmset's display-sleep assertions.
func Default(LookupEnv) Setup {
	return Setup{
		Candidates: []Candidate{MacOS(runCommand("ioreg", "-c", "IOHIDSystem", "-d", "4"))},
		Inhibitors: []InhibitChecker{PMSet(runCommand("pmset", "-g", "assertions"))},
	}
}

// runCommand returns a CommandOutput for name and args.
func runCommand(name string, args ...string) CommandOutput {
	return func(ctx context.Context) ([]byte, error) {
		return exec.CommandContext(ctx, name, args...).Output()
	}
}
