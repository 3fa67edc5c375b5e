package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func handle(t *testing.T, h Handlers, c Caller, req string) string {
	t.Helper()
	return string(h.Handle(context.Background(), c, []byte(req)).JSON())
}

func errType(t *testing.T, answer string) string {
	t.Helper()
	e, err := ParseResponse([]byte(answer))
	if err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	if e == nil {
		return ""
	}
	return e.Type
}

// The answers are the documented JSON, byte for byte, so scripts can match them.
func TestHandleAnswers(t *testing.T) {
	svc := newService()
	h := Handlers{Service: svc}
	alice := Caller{Account: "uid:1000", Via: "socket"}
	root := Caller{Account: "uid:0", Administrator: true, Via: "socket"}
	for _, tc := range []struct {
		c        Caller
		req, out string
	}{
		{alice, `{"protocol_version": 1, "action": {"kind": "pause"}}`, `{"outcome":"lending","lending_enabled":false}`},
		{alice, `{"protocol_version": 1, "action": {"kind": "resume"}}`, `{"outcome":"lending","lending_enabled":true}`},
		{root, `{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": false}}`, `{"outcome":"resource","resource":"gpu0","enabled":false}`},
		{root, `{"protocol_version": 1, "action": {"kind": "end_debug"}}`, `{"outcome":"debug"}`},
		{alice, `{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 12.5, "source": "x11", "inhibited": false}}`, `{"outcome":"presence","accepted":true}`},
		{root, `{"protocol_version": 1, "action": {"kind": "release_work", "id": 7, "upstream_stopped": true}}`, `{"error":{"type":"not_available","message":"held work is not tracked by this daemon"}}`},
	} {
		if got := handle(t, h, tc.c, tc.req); got != tc.out {
			t.Errorf("%s\n got %s\nwant %s", tc.req, got, tc.out)
		}
	}
	got := handle(t, h, root, `{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": 30}}`)
	defer svc.Close()
	var a Answer
	if err := json.Unmarshal([]byte(got), &a); err != nil || a.Outcome != "debug" || a.DebugUntil == nil {
		t.Errorf("start_debug answered %s", got)
	}
}

// The Service's rules hold over the protocol: a standard account may pause
// and resume its own pause, and nothing else.
func TestHandleRefusals(t *testing.T) {
	h := Handlers{Service: newService()}
	bob := Caller{Account: "uid:1001", Via: "socket"}
	for _, req := range []string{
		`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": false}}`,
		`{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": 30}}`,
		`{"protocol_version": 1, "action": {"kind": "end_debug"}}`,
		`{"protocol_version": 1, "action": {"kind": "release_work", "id": 7}}`,
		`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"revision": "r1", "settings": {}}}}`,
	} {
		if got := errType(t, handle(t, h, bob, req)); got != ErrAdministratorRequired {
			t.Errorf("standard account %s: got %q, want administrator_required", req, got)
		}
	}
	h.Service.Pause(Caller{Via: "http"}) // a token pause names no account
	if got := errType(t, handle(t, h, bob, `{"protocol_version": 1, "action": {"kind": "resume"}}`)); got != ErrAdministratorRequired {
		t.Errorf("standard account resumed a token pause: %q", got)
	}
	root := Caller{Account: "uid:0", Administrator: true, Via: "socket"}
	if got := errType(t, handle(t, h, root, `{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu9", "enabled": true}}`)); got != ErrNotFound {
		t.Errorf("unknown resource: %q, want not_found", got)
	}
	if got := errType(t, handle(t, h, root, `{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": 241}}`)); got != ErrInvalidRequest {
		t.Errorf("241 minutes: %q, want invalid_request", got)
	}
	if got := errType(t, handle(t, Handlers{}, root, `{"protocol_version": 1, "action": {"kind": "pause"}}`)); got != ErrNotAvailable {
		t.Errorf("no service: %q, want not_available", got)
	}
}

type fakeSaver struct {
	calls int
	rev   string
	doc   string
	err   error
}

func (f *fakeSaver) SaveSettings(_ context.Context, _ Caller, rev string, doc json.RawMessage) (SaveResult, error) {
	f.calls++
	f.rev, f.doc = rev, string(doc)
	if f.err != nil {
		return SaveResult{}, f.err
	}
	return SaveResult{Revision: "r2", Applied: []string{"lending"}, RestartRequired: []string{"server.listen"}}, nil
}

type fakeReleaser struct {
	id      uint64
	stopped bool
	err     error
}

func (f *fakeReleaser) ReleaseWork(_ context.Context, _ Caller, id uint64, stopped bool) error {
	f.id, f.stopped = id, stopped
	return f.err
}

type fakeSink struct{ got []string }

func (f *fakeSink) ReportPresence(account string, idle float64, source string, inhibited bool) {
	b, _ := json.Marshal([]any{account, idle, source, inhibited})
	f.got = append(f.got, string(b))
}

// save_settings passes the revision and the settings object to the saver,
// and its refusals keep their documented types; an unexpected failure is
// "internal" and does not leak its cause.
func TestSaveSettings(t *testing.T) {
	root := Caller{Account: "uid:0", Administrator: true, Via: "socket"}
	saver := &fakeSaver{}
	h := Handlers{Service: newService(), Settings: saver}
	req := `{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"revision": "r1", "settings": {"lending": {"enabled": true}}}}}`
	if got := handle(t, h, root, req); got != `{"outcome":"settings","revision":"r2","applied":["lending"],"restart_required":["server.listen"]}` {
		t.Errorf("save answered %s", got)
	}
	if saver.rev != "r1" || saver.doc != `{"lending": {"enabled": true}}` {
		t.Errorf("saver got revision %q settings %s", saver.rev, saver.doc)
	}

	saver.err = &Error{Kind: ErrStaleRevision, Msg: "the settings changed since revision r1"}
	if got := errType(t, handle(t, h, root, req)); got != ErrStaleRevision {
		t.Errorf("stale: %q", got)
	}
	saver.err = &InvalidSettingsError{Problems: []Problem{{"upstream[0].target", "bad URL"}, {"auth.token[1].scopes", "unknown scope"}}}
	got := handle(t, h, root, req)
	if got != `{"error":{"type":"invalid_settings","message":"the settings were not saved; fix every problem listed","problems":[{"key":"upstream[0].target","message":"bad URL"},{"key":"auth.token[1].scopes","message":"unknown scope"}]}}` {
		t.Errorf("invalid settings answered %s", got)
	}
	saver.err = errors.New("rename /etc/vacancyd/secret-path: disk full")
	got = handle(t, h, root, req)
	if errType(t, got) != ErrInternal || strings.Contains(got, "secret-path") {
		t.Errorf("internal failure answered %s", got)
	}

	calls := saver.calls
	if errType(t, handle(t, h, Caller{Account: "uid:1000", Via: "socket"}, req)) != ErrAdministratorRequired || saver.calls != calls {
		t.Error("a standard account reached the saver")
	}
}

func TestReleaseWorkAndPresence(t *testing.T) {
	root := Caller{Account: "uid:0", Administrator: true, Via: "socket"}
	rel := &fakeReleaser{}
	sink := &fakeSink{}
	h := Handlers{Service: newService(), Work: rel, Presence: sink}
	if got := handle(t, h, root, `{"protocol_version": 1, "action": {"kind": "release_work", "id": 7, "upstream_stopped": true}}`); got != `{"outcome":"work","id":7,"released":true,"upstream_stopped":true}` || rel.id != 7 || !rel.stopped {
		t.Errorf("release answered %s, releaser got %d %v", got, rel.id, rel.stopped)
	}
	rel.err = &Error{Kind: ErrNotFound, Msg: "no held work 8"}
	if got := errType(t, handle(t, h, root, `{"protocol_version": 1, "action": {"kind": "release_work", "id": 8}}`)); got != ErrNotFound || rel.stopped {
		t.Errorf("unknown work: %q (upstream_stopped defaulted to %v)", got, rel.stopped)
	}

	// Any named account may report presence.
	bob := Caller{Account: "uid:1001", Via: "socket"}
	if got := handle(t, h, bob, `{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 3, "source": "x11"}}`); got != `{"outcome":"presence","accepted":true}` {
		t.Errorf("presence answered %s", got)
	}
	if len(sink.got) != 1 || sink.got[0] != `["uid:1001",3,"x11",false]` {
		t.Errorf("sink got %v", sink.got)
	}
	if got := errType(t, handle(t, h, Caller{Via: "http"}, `{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 3, "source": "x11"}}`)); got != ErrInvalidRequest {
		t.Errorf("anonymous presence report: %q", got)
	}
}

// Decoding is strict, and each refusal has its documented type.
func TestDecodeRequestStrict(t *testing.T) {
	for _, tc := range []struct {
		req, kind, msg string
	}{
		{`{"protocol_version": 2, "action": {"kind": "pause"}}`, ErrUnsupportedVersion, "protocol version 2 is not supported; this service speaks 1"},
		{`{"protocol_version": 0, "action": {"kind": "pause"}}`, ErrUnsupportedVersion, "version 0"},
		// A later version's new fields do not hide that the version is the problem.
		{`{"protocol_version": 2, "action": {"kind": "pause"}, "nonce": "x"}`, ErrUnsupportedVersion, "version 2"},
		{`{"action": {"kind": "pause"}}`, ErrInvalidRequest, `no "protocol_version"`},
		{`{"protocol_version": "1", "action": {"kind": "pause"}}`, ErrInvalidRequest, "integer"},
		{`{"protocol_version": 1.5, "action": {"kind": "pause"}}`, ErrInvalidRequest, "integer"},
		{`{"protocol_version": 1, "action": {"kind": "reboot"}}`, ErrUnknownAction, `unknown action kind "reboot"; known kinds: end_debug, pause,`},
		{`{"protocol_version": 1, "action": {"kind": "Pause"}}`, ErrUnknownAction, `"Pause"`},
		{`{"protocol_version": 1, "action": {}}`, ErrInvalidRequest, `no "kind"`},
		{`{"protocol_version": 1}`, ErrInvalidRequest, `no "action"`},
		{`{"protocol_version": 1, "action": "pause"}`, ErrInvalidRequest, "JSON object"},
		{`{"protocol_version": 1, "action": {"kind": "pause"}, "extra": 1}`, ErrInvalidRequest, `unknown field "extra"`},
		{`{"protocol_version": 1, "action": {"kind": "pause", "resource": "gpu0"}}`, ErrInvalidRequest, `pause takes no field "resource"`},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0"}}`, ErrInvalidRequest, `needs the field "enabled"`},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "", "enabled": true}}`, ErrInvalidRequest, "empty"},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": null}}`, ErrInvalidRequest, "null"},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": "no"}}`, ErrInvalidRequest, "true or false"},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "Resource": "gpu0", "enabled": true}}`, ErrInvalidRequest, `"Resource"`},
		{`{"protocol_version": 1, "action": {"kind": "pause", "kind": "resume"}}`, ErrInvalidRequest, "twice"},
		{`{"protocol_version": 1, "protocol_version": 1, "action": {"kind": "pause"}}`, ErrInvalidRequest, "twice"},
		{`{"protocol_version": 1, "action": {"kind": "release_work", "id": -1}}`, ErrInvalidRequest, "whole number"},
		{`{"protocol_version": 1, "action": {"kind": "release_work", "id": 7.5}}`, ErrInvalidRequest, "whole number"},
		{`{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": "30"}}`, ErrInvalidRequest, "whole number"},
		{`{"protocol_version": 1, "action": {"kind": "start_debug"}}`, ErrInvalidRequest, `needs the field "minutes"`},
		{`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"lending": {}}}}`, ErrInvalidRequest, `unknown field "lending"`},
		{`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"settings": {}}}}`, ErrInvalidRequest, `needs "revision"`},
		{`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"revision": "r", "settings": []}}}`, ErrInvalidRequest, "JSON object"},
		{`{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": -1, "source": "x11"}}`, ErrInvalidRequest, "negative"},
		{`{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 1, "source": "x 11"}}`, ErrInvalidRequest, "letters"},
		{`{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 1, "source": ""}}`, ErrInvalidRequest, "1 to 64"},
		{`{"protocol_version": 1, "action": {"kind": "pause"}} {}`, ErrInvalidRequest, "after the JSON object"},
		{`{"protocol_version": 1, "action": {"kind": "pause"}} x`, ErrInvalidRequest, "JSON"},
		{`[{"protocol_version": 1}]`, ErrInvalidRequest, "not a JSON object"},
		{``, ErrInvalidRequest, "not valid JSON"},
		{`{"protocol_version": 1, "action": {"kind": "pause"}`, ErrInvalidRequest, "not valid JSON"},
		{`{"protocol_version": 1, "action": {"kind": "pause", "pad": "` + strings.Repeat("x", MaxRequestBytes) + `"}}`, ErrInvalidRequest, "larger than"},
	} {
		_, err := DecodeRequest([]byte(tc.req))
		e, ok := AsError(err)
		if !ok || e.Kind != tc.kind || !strings.Contains(e.Msg, tc.msg) {
			req := tc.req
			if len(req) > 120 {
				req = req[:120] + "..."
			}
			t.Errorf("%s\n got %v\nwant %s containing %q", req, err, tc.kind, tc.msg)
		}
	}
}

// Every kind in the seed's list decodes, with its fields.
func TestDecodeRequestKinds(t *testing.T) {
	for _, tc := range []struct {
		req  string
		want Action
	}{
		{`{"protocol_version": 1, "action": {"kind": "pause"}}`, Action{Kind: KindPause}},
		{` {"action": {"kind": "resume"}, "protocol_version": 1}` + "\n", Action{Kind: KindResume}},
		{`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": false}}`, Action{Kind: KindSetResource, Resource: "gpu0", Enabled: ptr(false)}},
		{`{"protocol_version": 1, "action": {"kind": "release_work", "id": 7, "upstream_stopped": true}}`, Action{Kind: KindReleaseWork, ID: ptr(uint64(7)), UpstreamStopped: ptr(true)}},
		{`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"revision": "abc", "settings": {"a": 1}}}}`, Action{Kind: KindSaveSettings, Settings: &SettingsDocument{Revision: "abc", Settings: json.RawMessage(`{"a": 1}`)}}},
		{`{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": 30}}`, Action{Kind: KindStartDebug, Minutes: ptr(30)}},
		{`{"protocol_version": 1, "action": {"kind": "end_debug"}}`, Action{Kind: KindEndDebug}},
		{`{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 12.5, "source": "x11", "inhibited": false}}`, Action{Kind: KindReportPresence, IdleSeconds: ptr(12.5), Source: "x11", Inhibited: ptr(false)}},
	} {
		r, err := DecodeRequest([]byte(tc.req))
		if err != nil {
			t.Errorf("%s: %v", tc.req, err)
			continue
		}
		if r.ProtocolVersion != 1 || !reflect.DeepEqual(r.Action, tc.want) {
			t.Errorf("%s\n got %+v\nwant %+v", tc.req, r.Action, tc.want)
		}
	}
}

func TestParseResponse(t *testing.T) {
	if e, err := ParseResponse([]byte(`{"outcome":"lending","lending_enabled":false}`)); e != nil || err != nil {
		t.Errorf("success parsed as %v, %v", e, err)
	}
	if e, err := ParseResponse([]byte(`{"error":{"type":"stale_revision","message":"m"}}`)); err != nil || e == nil || e.Type != ErrStaleRevision {
		t.Errorf("refusal parsed as %v, %v", e, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `{"error": 1}`, `{"error": {}}`} {
		if _, err := ParseResponse([]byte(bad)); err == nil {
			t.Errorf("ParseResponse(%q) accepted", bad)
		}
	}
}

// FuzzDecodeRequest: the decoder never panics, and what it accepts survives
// a round trip through its own encoding unchanged.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"protocol_version": 1, "action": {"kind": "pause"}}`,
		`{"protocol_version": 1, "action": {"kind": "set_resource", "resource": "gpu0", "enabled": false}}`,
		`{"protocol_version": 1, "action": {"kind": "release_work", "id": 7, "upstream_stopped": true}}`,
		`{"protocol_version": 1, "action": {"kind": "save_settings", "settings": {"revision": "r", "settings": {"x": [1, {"y": null}]}}}}`,
		`{"protocol_version": 1, "action": {"kind": "start_debug", "minutes": 30}}`,
		`{"protocol_version": 1, "action": {"kind": "report_presence", "idle_seconds": 12.5, "source": "x11", "inhibited": true}}`,
		`{"protocol_version": 2}`,
		`{"protocol_version": 1, "action": {"kind": "pause", "kind": "pause"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			if _, ok := AsError(err); !ok {
				t.Fatalf("error of unexpected type: %v", err)
			}
			return
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal accepted request: %v", err)
		}
		r2, err := DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request %s refused: %v", enc, err)
		}
		if r.Action.Settings != nil {
			var a, b bytes.Buffer
			_ = json.Compact(&a, r.Action.Settings.Settings)
			_ = json.Compact(&b, r2.Action.Settings.Settings)
			if a.String() != b.String() {
				t.Fatalf("settings changed in a round trip: %s vs %s", a.String(), b.String())
			}
			r.Action.Settings.Settings, r2.Action.Settings.Settings = nil, nil
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed %+v into %+v", r, r2)
		}
	})
}
