package admin

// The request protocol shared by the Linux admin socket, the Windows admin
// pipe and `vacancyd admin-request`. A client sends exactly one JSON object:
//
//	{"protocol_version": 1, "action": {"kind": "<kind>", ...fields}}
//
// and gets exactly one JSON object back: the action's answer on success, or
// {"error": {"type": "...", "message": "...", "problems": [...]}} when it is
// refused. The kinds, their fields and their answers:
//
//	pause                                    {"outcome":"lending","lending_enabled":false}
//	resume                                   {"outcome":"lending","lending_enabled":true}
//	set_resource resource, enabled           {"outcome":"resource","resource":"gpu0","enabled":false}
//	release_work id, upstream_stopped        {"outcome":"work","id":7,"released":true,"upstream_stopped":true}
//	save_settings settings                   {"outcome":"settings","revision":"<new>","applied":[...],"restart_required":[...]}
//	start_debug minutes                      {"outcome":"debug","debug_until":"<RFC 3339 time>"}
//	end_debug                                {"outcome":"debug"}
//	report_presence idle_seconds, source,    {"outcome":"presence","accepted":true}
//	                inhibited (optional)
//
// save_settings carries the settings contract's whole document, the one GET
// /admin/settings returns: {"revision": "<revision read>", "settings": {...}}.
// release_work's upstream_stopped is optional and defaults to false.
//
// Decoding is strict: field names match exactly (no case folding), a field
// appears at most once, a kind accepts only its own fields, null is never a
// value, and nothing may follow the object. The protocol version is read
// before anything else, so a client speaking a later version is told so
// rather than being told about fields it added.
//
// Who may do what is the Service's rule (Pause: anyone; Resume: the pausing
// account or an administrator; the rest: an administrator), plus:
// release_work and save_settings need an administrator, and report_presence
// is open to any caller the channel could name (Caller.Account not empty).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// ProtocolVersion is the only request protocol version this build speaks.
const ProtocolVersion = 1

// MaxRequestBytes caps a request: the HTTP settings API's 4 MiB document
// cap, plus room for the request around it.
const MaxRequestBytes = 4<<20 + 4<<10

// Action kinds.
const (
	KindPause          = "pause"
	KindResume         = "resume"
	KindSetResource    = "set_resource"
	KindReleaseWork    = "release_work"
	KindSaveSettings   = "save_settings"
	KindStartDebug     = "start_debug"
	KindEndDebug       = "end_debug"
	KindReportPresence = "report_presence"
)

// Error kinds the protocol adds to the Service's own (administrator_required,
// invalid_request, not_found).
const (
	// ErrUnsupportedVersion: protocol_version is not ProtocolVersion.
	ErrUnsupportedVersion = "unsupported_protocol_version"
	// ErrUnknownAction: action.kind names no action this build knows.
	ErrUnknownAction = "unknown_action"
	// ErrNotAvailable: the action exists but this daemon has nothing to
	// perform it (no settings saver or work registry wired in).
	ErrNotAvailable = "not_available"
	// ErrStaleRevision: save_settings named a revision other than the saved
	// file's; read the settings again and redo the change.
	ErrStaleRevision = "stale_revision"
	// ErrInvalidSettings: the settings document failed validation; every
	// problem is listed in "problems".
	ErrInvalidSettings = "invalid_settings"
	// ErrInternal: the action failed inside the daemon; the log says why.
	ErrInternal = "internal"
)

// MaxPresenceSource bounds report_presence's source name.
const MaxPresenceSource = 64

// Request is one decoded request.
type Request struct {
	ProtocolVersion int    `json:"protocol_version"`
	Action          Action `json:"action"`
}

// Action is a request's action. Only the fields of its Kind are set.
type Action struct {
	Kind string `json:"kind"`

	// set_resource
	Resource string `json:"resource,omitempty"`
	Enabled  *bool  `json:"enabled,omitempty"`

	// release_work
	ID              *uint64 `json:"id,omitempty"`
	UpstreamStopped *bool   `json:"upstream_stopped,omitempty"`

	// save_settings
	Settings *SettingsDocument `json:"settings,omitempty"`

	// start_debug
	Minutes *int `json:"minutes,omitempty"`

	// report_presence
	IdleSeconds *float64 `json:"idle_seconds,omitempty"`
	Source      string   `json:"source,omitempty"`
	Inhibited   *bool    `json:"inhibited,omitempty"`
}

// SettingsDocument is the settings contract's document: the revision the
// client read and the complete settings it wants saved.
type SettingsDocument struct {
	Revision string          `json:"revision"`
	Settings json.RawMessage `json:"settings"`
}

// Problem is one reason a settings document is invalid, at its key.
type Problem struct {
	Key     string `json:"key"`
	Message string `json:"message"`
}

// InvalidSettingsError is a SettingsSaver's answer to a document that fails
// validation. It lists every problem, not just the first.
type InvalidSettingsError struct {
	Problems []Problem
}

func (e *InvalidSettingsError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Key + ": " + p.Message
	}
	return ErrInvalidSettings + ": " + strings.Join(parts, "; ")
}

// SettingsSaver saves a complete settings document. The daemon implements it
// with the settings contract: it returns *Error{Kind: ErrStaleRevision} when
// revision is not the saved file's, *InvalidSettingsError listing every
// problem, *Error with another kind for other refusals it wants the client
// to see (e.g. "no_config_file"), or the save's result. Any other error is
// answered "internal" and only logged. A failed save changes nothing.
// Callers have already checked that c is an administrator.
type SettingsSaver interface {
	SaveSettings(ctx context.Context, c Caller, revision string, settings json.RawMessage) (SaveResult, error)
}

// SaveResult is what a successful save reports, as the HTTP settings API
// reports it.
type SaveResult struct {
	// Revision is the saved file's new revision.
	Revision string
	// Applied names what took effect at once.
	Applied []string
	// RestartRequired names the settings (by key) that take effect only
	// after a restart; empty when everything applied live.
	RestartRequired []string
	// Warnings are the new settings' validation warnings.
	Warnings []string
}

// WorkReleaser releases held borrowed work by its id. upstreamStopped says
// the owner has stopped the work on the upstream already. It returns
// *Error{Kind: ErrNotFound} for an unknown id. Callers have already checked
// that c is an administrator.
type WorkReleaser interface {
	ReleaseWork(ctx context.Context, c Caller, id uint64, upstreamStopped bool) error
}

// PresenceSink receives session reporters' presence reports. account is the
// verified account that sent the report ("uid:1000", a SID).
type PresenceSink interface {
	ReportPresence(account string, idleSeconds float64, source string, inhibited bool)
}

// Handlers is everything a request may reach. Service is required for the
// lending and debug actions; a nil Settings or Work answers not_available; a
// nil Presence accepts reports and drops them.
type Handlers struct {
	Service  *Service
	Settings SettingsSaver
	Work     WorkReleaser
	Presence PresenceSink
	// Log receives the causes of internal failures; nil logs nothing.
	Log *slog.Logger
}

// Answers of the actions outside Service.
type (
	// WorkAnswer answers release_work.
	WorkAnswer struct {
		Outcome         string `json:"outcome"`
		ID              uint64 `json:"id"`
		Released        bool   `json:"released"`
		UpstreamStopped bool   `json:"upstream_stopped"`
	}
	// SettingsAnswer answers save_settings.
	SettingsAnswer struct {
		Outcome         string   `json:"outcome"`
		Revision        string   `json:"revision"`
		Applied         []string `json:"applied"`
		RestartRequired []string `json:"restart_required"`
		Warnings        []string `json:"warnings,omitempty"`
	}
	// PresenceAnswer answers report_presence.
	PresenceAnswer struct {
		Outcome  string `json:"outcome"`
		Accepted bool   `json:"accepted"`
	}
)

// Response is one answer: Answer on success, Error when refused.
type Response struct {
	Answer any
	Error  *ErrorBody
}

// ErrorBody is the refusal inside {"error": ...}.
type ErrorBody struct {
	Type     string    `json:"type"`
	Message  string    `json:"message"`
	Problems []Problem `json:"problems,omitempty"`
}

// MarshalJSON writes the answer itself, or {"error": {...}}.
func (r Response) MarshalJSON() ([]byte, error) {
	if r.Error != nil {
		return json.Marshal(struct {
			Error *ErrorBody `json:"error"`
		}{r.Error})
	}
	return json.Marshal(r.Answer)
}

// JSON returns the response as compact JSON.
func (r Response) JSON() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// Every answer type marshals; this only guards a future mistake.
		b, _ = json.Marshal(Response{Error: &ErrorBody{Type: ErrInternal, Message: "the answer could not be encoded"}})
	}
	return b
}

// ParseResponse reads an answer as a client: it returns the refusal when the
// answer is {"error": ...}, nil when it is any other JSON object, and an error
// when it is not a JSON object at all.
func ParseResponse(b []byte) (*ErrorBody, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil || probe == nil {
		return nil, fmt.Errorf("the answer is not a JSON object")
	}
	raw, ok := probe["error"]
	if !ok {
		return nil, nil
	}
	var e ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.Type == "" {
		return nil, fmt.Errorf("the answer's error is malformed")
	}
	return &e, nil
}

// Handle decodes one request and performs it for c. See the file comment for
// the request and answer shapes.
func Handle(ctx context.Context, svc *Service, c Caller, req []byte) Response {
	return Handlers{Service: svc}.Handle(ctx, c, req)
}

// Handle decodes one request and performs it for c.
func (h Handlers) Handle(ctx context.Context, c Caller, req []byte) Response {
	r, err := DecodeRequest(req)
	if err != nil {
		return h.fail(err)
	}
	return h.do(ctx, c, r.Action)
}

// do performs an action DecodeRequest accepted, so its required fields are set.
func (h Handlers) do(ctx context.Context, c Caller, a Action) Response {
	needService := a.Kind != KindReleaseWork && a.Kind != KindSaveSettings && a.Kind != KindReportPresence
	if needService && h.Service == nil {
		return refuse(ErrNotAvailable, "the admin service is not running")
	}
	switch a.Kind {
	case KindPause:
		return ok(h.Service.Pause(c))
	case KindResume:
		return h.result(h.Service.Resume(c))
	case KindSetResource:
		return h.result(h.Service.SetResource(c, a.Resource, *a.Enabled))
	case KindStartDebug:
		return h.result(h.Service.StartDebug(c, *a.Minutes))
	case KindEndDebug:
		return h.result(h.Service.EndDebug(c))
	case KindReleaseWork:
		if !c.Administrator {
			return refuse(ErrAdministratorRequired, "releasing held work needs an administrator")
		}
		if h.Work == nil {
			return refuse(ErrNotAvailable, "held work is not tracked by this daemon")
		}
		stopped := a.UpstreamStopped != nil && *a.UpstreamStopped
		if err := h.Work.ReleaseWork(ctx, c, *a.ID, stopped); err != nil {
			return h.fail(err)
		}
		return ok(WorkAnswer{Outcome: "work", ID: *a.ID, Released: true, UpstreamStopped: stopped})
	case KindSaveSettings:
		if !c.Administrator {
			return refuse(ErrAdministratorRequired, "saving settings needs an administrator")
		}
		if h.Settings == nil {
			return refuse(ErrNotAvailable, "this daemon cannot save settings; edit the file and restart")
		}
		res, err := h.Settings.SaveSettings(ctx, c, a.Settings.Revision, a.Settings.Settings)
		if err != nil {
			return h.fail(err)
		}
		return ok(SettingsAnswer{Outcome: "settings", Revision: res.Revision, Applied: orEmpty(res.Applied), RestartRequired: orEmpty(res.RestartRequired), Warnings: res.Warnings})
	case KindReportPresence:
		if c.Account == "" {
			return refuse(ErrInvalidRequest, "a presence report needs a caller the channel can name")
		}
		inhibited := a.Inhibited != nil && *a.Inhibited
		if h.Presence != nil {
			h.Presence.ReportPresence(c.Account, *a.IdleSeconds, a.Source, inhibited)
		}
		return ok(PresenceAnswer{Outcome: "presence", Accepted: true})
	}
	return refuse(ErrUnknownAction, fmt.Sprintf("unknown action kind %q", a.Kind))
}

func ok(v any) Response { return Response{Answer: v} }

// orEmpty makes a nil list encode as [] rather than null.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func refuse(kind, msg string) Response {
	return Response{Error: &ErrorBody{Type: kind, Message: msg}}
}

func (h Handlers) result(a Answer, err error) Response {
	if err != nil {
		return h.fail(err)
	}
	return ok(a)
}

// fail turns an action's error into a refusal. Errors the actions define
// keep their kind and message; anything else is internal and only logged.
func (h Handlers) fail(err error) Response {
	var inv *InvalidSettingsError
	if errors.As(err, &inv) {
		return Response{Error: &ErrorBody{Type: ErrInvalidSettings, Message: "the settings were not saved; fix every problem listed", Problems: inv.Problems}}
	}
	if e, ok := AsError(err); ok {
		return refuse(e.Kind, e.Msg)
	}
	if h.Log != nil {
		h.Log.Error("admin action failed", "err", err)
	}
	return refuse(ErrInternal, "the action failed; the service log says why")
}
