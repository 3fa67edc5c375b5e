package gpu

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestParseStateAccepts(t *testing.T) {
	exp := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for in, want := range map[string]State{
		`{"pressure": true}`:  {Pressure: true},
		`{"pressure": false}`: {},
		`{"pressure": true, "reason": "rendering", "expires": "2026-12-01T18:00:00Z", "resource": "gpu0"}`: {Pressure: true, Reason: "rendering", Expires: exp, Resource: "gpu0"},
		"  {\"pressure\":true,\"reason\":\"a\\u0007b\\nc\"}\n":                                             {Pressure: true, Reason: "a b c"},
		`{"pressure": true, "expires": "2026-12-01T19:00:00.5+01:00"}`:                                     {Pressure: true, Expires: exp.Add(500 * time.Millisecond)},
	} {
		got, err := ParseState([]byte(in))
		if err != nil {
			t.Errorf("ParseState(%s): %v", in, err)
			continue
		}
		if got.Pressure != want.Pressure || got.Reason != want.Reason || got.Resource != want.Resource || !got.Expires.Equal(want.Expires) {
			t.Errorf("ParseState(%s) = %+v; want %+v", in, got, want)
		}
	}
}

// Strict: anything the file's author may have meant differently is an
// error, never a silent default.
func TestParseStateRejects(t *testing.T) {
	for in, want := range map[string]string{
		``:                                       "empty file",
		`   `:                                    "empty file",
		`null`:                                   "not a JSON object",
		`[]`:                                     "not a JSON object",
		`true`:                                   "not a JSON object",
		`{"pressure": true`:                      "not a JSON object",
		`{}`:                                     `"pressure" is missing`,
		`{"pressure": "yes"}`:                    `"pressure": must be true or false`,
		`{"pressure": null}`:                     `"pressure": null`,
		`{"pressure": 1}`:                        `"pressure": must be true or false`,
		`{"Pressure": true}`:                     `unknown key "Pressure"`,
		`{"pressure": true, "x": 1}`:             `unknown key "x"`,
		`{"pressure": true, "pressure": false}`:  `given twice`,
		`{"pressure": true} {"pressure": false}`: "data after the JSON object",
		`{"pressure": true} x`:                   "data after the JSON object",
		`{"pressure": true, "reason": 5}`:        `"reason": must be a string`,
		`{"pressure": true, "resource": ""}`:     `"resource": must be a resource id`,
		`{"pressure": true, "expires": "tomorrow"}`: `"expires": "tomorrow" is not an RFC 3339 time`,
		`{"pressure": true, "expires": 1767290400}`: `"expires": must be an RFC 3339 time string`,
		`{"pressure": true, "reason": null}`:        `"reason": null`,
	} {
		_, err := ParseState([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseState(%s) error %v; want one containing %q", in, err, want)
		}
	}
	if _, err := ParseState([]byte(`{"pressure": true, "reason": "` + strings.Repeat("x", maxStateBytes) + `"}`)); err == nil {
		t.Error("oversized file accepted")
	}
}

func TestParseStateCutsLongReason(t *testing.T) {
	st, err := ParseState([]byte(`{"pressure": true, "reason": "` + strings.Repeat("é", 300) + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(st.Reason) || len(st.Reason) > maxReasonBytes+len("…") {
		t.Errorf("reason of %d bytes, valid UTF-8 %t", len(st.Reason), utf8.ValidString(st.Reason))
	}
}

func FuzzParseState(f *testing.F) {
	for _, s := range []string{
		`{"pressure": true, "reason": "rendering", "expires": "2026-12-01T18:00:00Z", "resource": "gpu0"}`,
		`{"pressure": false}`, `{}`, `null`, `{"pressure": true, "pressure": true}`, `{"pressure":true,"reason":"\u001b[31m"}`,
		`{"pressure": true, "expires": "2026-12-01T18:00:00.123456789-07:00"}`, "{\"pressure\": true, \"reason\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseState(b)
		if err != nil {
			if st != (State{}) {
				t.Errorf("error %v with a non-zero state %+v", err, st)
			}
			return
		}
		if len(st.Reason) > maxReasonBytes+len("…") || !utf8.ValidString(st.Reason) {
			t.Errorf("reason %q escaped the limits", st.Reason)
		}
		if strings.IndexFunc(st.Reason, unicode.IsControl) >= 0 {
			t.Errorf("reason %q holds control characters", st.Reason)
		}
		if len(b) > maxStateBytes {
			t.Errorf("accepted %d bytes", len(b))
		}
	})
}

func FuzzParseListeners(f *testing.F) {
	f.Add([]byte(tcpHeader + "   0: 0100007F:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n"))
	f.Add([]byte(tcpHeader + "   0: 00000000000000000000000001000000:1FFC 00000000000000000000000000000000:0000 0A 0 0 0 0 0 99\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range parseListeners(b) {
			if l.inode == 0 || !l.addr.IsValid() {
				t.Errorf("bad socket %+v", l)
			}
		}
		parseStatPPID(b)
	})
}
