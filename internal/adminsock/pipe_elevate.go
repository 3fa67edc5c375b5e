package adminsock

// The owner console's approval flow on Windows: an action the signed-in
// account may not take itself (resuming another account's pause, switching
// a resource, saving settings) is staged in a file and sent by
// `vacancyd.exe admin-request --request <file>` run elevated, which raises
// the Windows approval prompt. RunElevated (pipe_elevate_windows.go) does the
// calls; the parts that decide something are here, tested everywhere.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// ErrDeclined is RunElevated's answer when the account chose No at the
// approval prompt: nothing ran and nothing changed.
var ErrDeclined = errors.New("the approval prompt was declined; nothing changed")

// DeclinedExitCode is the exit code RunElevated reports with ErrDeclined,
// the one admin-request documents for a declined approval (cli.ExitDeclined).
const DeclinedExitCode = 46

// errorCancelled is ERROR_CANCELLED, which ShellExecuteEx sets when the
// approval prompt is declined.
const errorCancelled = syscall.Errno(1223)

// ElevateOptions configure RunElevated.
type ElevateOptions struct {
	// Exe is vacancyd.exe's path; empty means the running executable.
	Exe string
	// Window is the console's window handle (an HWND), which the approval
	// prompt is shown over; zero for none.
	Window uintptr
}

// elevationResult maps how the elevated run went to RunElevated's answer:
// the prompt declined (ShellExecuteEx's ERROR_CANCELLED) is
// DeclinedExitCode and ErrDeclined; any other failure to start is an error
// with exit code -1; otherwise the exit code is admin-request's own.
func elevationResult(startErr error, exitCode uint32) (int, error) {
	switch {
	case errors.Is(startErr, errorCancelled):
		return DeclinedExitCode, ErrDeclined
	case startErr != nil:
		return -1, fmt.Errorf("adminsock: start the elevated admin-request: %w", startErr)
	}
	return int(exitCode), nil
}

// elevatedParameters is the command line after the executable's name for
// the elevated run: admin-request reading the staged file.
func elevatedParameters(requestPath string) string {
	return "admin-request --request " + windowsQuoteArg(requestPath)
}

// windowsQuoteArg quotes s so that CommandLineToArgvW, and so Go's own
// os.Args on Windows, read it back as one argument, unchanged: the rules of
// syscall.EscapeArg, which exists only on Windows.
func windowsQuoteArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, " \t\"") {
		// Backslashes are literal unless they precede a quote, and
		// there is none here.
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			slashes++
		case '"':
			// Double the backslashes before a quote, then escape it.
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(c)
	}
	// Backslashes before the closing quote are doubled too.
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String()
}
