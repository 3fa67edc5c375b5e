package adminsock

// The approval flow's decisions: the staged file's security descriptor, the
// elevated command line, and what a declined prompt means.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// The staged request file is the signed-in account's, Administrators' and
// LocalSystem's alone.
func TestStagedFileSDDL(t *testing.T) {
	for _, tc := range []struct{ user, want string }{
		{testUserSID, "D:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;FA;;;" + testUserSID + ")"},
		{sidLocalSystem, "D:P(A;;FA;;;SY)(A;;FA;;;BA)"},
		{"", "D:P(A;;FA;;;SY)(A;;FA;;;BA)"},
	} {
		if got := stagedFileSDDL(tc.user); got != tc.want {
			t.Errorf("stagedFileSDDL(%q) = %s, want %s", tc.user, got, tc.want)
		}
	}
}

// A declined approval prompt is exit 46 and ErrDeclined; admin-request's own
// exit codes pass through.
func TestElevationResult(t *testing.T) {
	for _, tc := range []struct {
		name     string
		startErr error
		code     uint32
		want     int
		wantErr  error
	}{
		{"done", nil, 0, 0, nil},
		{"refused", nil, 41, 41, nil},
		{"stale revision", nil, 42, 42, nil},
		{"declined", errorCancelled, 0, DeclinedExitCode, ErrDeclined},
		{"declined, wrapped", fmt.Errorf("ShellExecuteEx: %w", syscall.Errno(1223)), 0, DeclinedExitCode, ErrDeclined},
		{"could not start", syscall.Errno(2), 0, -1, syscall.Errno(2)},
	} {
		got, err := elevationResult(tc.startErr, tc.code)
		if got != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: elevationResult = %d, %v; want %d, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if DeclinedExitCode != 46 {
		t.Errorf("DeclinedExitCode = %d; the documented code is 46", DeclinedExitCode)
	}
}

// parseWindowsArgs splits a command line as CommandLineToArgvW does for
// arguments after the program name (the 2008 rules Go's os.Args follows).
func parseWindowsArgs(cmd string) []string {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(cmd); {
		c := cmd[i]
		switch {
		case c == '\\':
			n := 0
			for i < len(cmd) && cmd[i] == '\\' {
				n++
				i++
			}
			if i < len(cmd) && cmd[i] == '"' {
				cur.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					cur.WriteByte('"')
					i++
				}
			} else {
				cur.WriteString(strings.Repeat(`\`, n))
			}
			have = true
			continue
		case c == '"':
			if inQuote && i+1 < len(cmd) && cmd[i+1] == '"' {
				cur.WriteByte('"')
				i += 2
				continue
			}
			inQuote = !inQuote
			have = true
		case (c == ' ' || c == '\t') && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
		i++
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}

// The staged file's path reaches the elevated admin-request as one
// argument, unchanged, whatever it holds.
func TestWindowsQuoteArg(t *testing.T) {
	fixed := map[string]string{
		``:                    `""`,
		`C:\Temp\r.json`:      `C:\Temp\r.json`,
		`C:\Users\A B\r.json`: `"C:\Users\A B\r.json"`,
		`C:\dir with space\`:  `"C:\dir with space\\"`,
		`a"b`:                 `"a\"b"`,
		`a\"b`:                `"a\\\"b"`,
	}
	for in, want := range fixed {
		if got := windowsQuoteArg(in); got != want {
			t.Errorf("windowsQuoteArg(%q) = %q, want %q", in, got, want)
		}
	}
	for _, s := range []string{
		``, `plain`, `C:\Users\Jo Smith\AppData\Local\Temp\vacancyd-request-123\request.json`,
		`trailing\`, `trailing space\ `, `two\\`, `"quoted"`, `\"`, `\\"`, "tab\there", `a  b`, `\\server\share\x y`,
	} {
		line := "admin-request --request " + windowsQuoteArg(s) + " --next"
		got := parseWindowsArgs(line)
		want := []string{"admin-request", "--request", s, "--next"}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
			t.Errorf("%q quoted as %q reads back as %q", s, windowsQuoteArg(s), got)
		}
	}
	p := `C:\Users\Jo Smith\AppData\Local\Temp\vacancyd-request-1\request.json`
	if got, want := elevatedParameters(p), `admin-request --request "`+p+`"`; got != want {
		t.Errorf("elevatedParameters = %q, want %q", got, want)
	}
}
