package api

import (
	"errors"
	"net/http"

	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/httperr"
	"github.com/vacancyd/vacancyd/internal/settings"
)

// maxSettingsBody caps a settings document.
const maxSettingsBody = 4 << 20

func (a *API) getSettings(w http.ResponseWriter, _ *http.Request) {
	doc, err := a.opts.Settings.Get()
	if err != nil {
		a.fail(w, &httperr.Error{Status: http.StatusInternalServerError, Type: "settings_unreadable", Msg: "the saved settings cannot be read; see the log", Err: err})
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// problemBody is the 422 answer: every problem at its key.
type problemBody struct {
	Error struct {
		Type     string         `json:"type"`
		Message  string         `json:"message"`
		Problems []problemEntry `json:"problems"`
	} `json:"error"`
}

type problemEntry struct {
	Key     string `json:"key"`
	Message string `json:"message"`
}

func (a *API) saveSettings(w http.ResponseWriter, r *http.Request) {
	var doc settings.Document
	if err := decodeBody(http.MaxBytesReader(w, r.Body, maxSettingsBody), &doc); err != nil || doc.Revision == "" || len(doc.Settings) == 0 {
		a.fail(w, &httperr.Error{Status: http.StatusBadRequest, Type: "invalid_request", Msg: `send {"revision": "...", "settings": {...}} as read from GET /admin/settings`, Err: err})
		return
	}
	res, ps, err := a.opts.Settings.Save(doc)
	var inv *config.InvalidError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, settings.ErrStale):
		a.fail(w, &httperr.Error{Status: http.StatusConflict, Type: "stale_revision", Msg: "the settings changed since they were read; read them again and reapply the change"})
	case errors.Is(err, settings.ErrNoFile):
		a.fail(w, &httperr.Error{Status: http.StatusConflict, Type: "no_config_file", Msg: err.Error()})
	case errors.As(err, &inv):
		var body problemBody
		body.Error.Type = "invalid_settings"
		body.Error.Message = "the settings were not saved; fix every problem listed"
		for _, p := range ps.Errors() {
			body.Error.Problems = append(body.Error.Problems, problemEntry{Key: p.Key, Message: p.Message})
		}
		writeJSON(w, http.StatusUnprocessableEntity, body)
	default:
		a.fail(w, &httperr.Error{Status: http.StatusInternalServerError, Type: "save_failed", Msg: "the settings could not be written; nothing changed", Err: err})
	}
}
