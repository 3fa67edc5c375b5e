package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/lending"
	"github.com/vacancyd/vacancyd/internal/settings"
)

// socketSettings lets the admin socket save settings through the same path
// as POST /admin/settings, translating its errors into the protocol's.
type socketSettings struct{ live *live }

func (s socketSettings) SaveSettings(_ context.Context, _ admin.Caller, revision string, doc json.RawMessage) (admin.SaveResult, error) {
	res, ps, err := s.live.Save(settings.Document{Revision: revision, Settings: doc})
	var inv *config.InvalidError
	switch {
	case err == nil:
		return admin.SaveResult{Revision: res.Revision, Applied: res.Applied, RestartRequired: res.RestartRequired, Warnings: res.Warnings}, nil
	case errors.Is(err, settings.ErrStale):
		return admin.SaveResult{}, &admin.Error{Kind: admin.ErrStaleRevision, Msg: "the settings changed since they were read; read them again and reapply the change"}
	case errors.Is(err, settings.ErrNoFile):
		return admin.SaveResult{}, &admin.Error{Kind: "no_config_file", Msg: err.Error()}
	case errors.As(err, &inv):
		out := &admin.InvalidSettingsError{}
		for _, p := range ps.Errors() {
			out.Problems = append(out.Problems, admin.Problem{Key: p.Key, Message: p.Message})
		}
		return admin.SaveResult{}, out
	}
	return admin.SaveResult{}, err
}

// workReleaser lets an administrator drop held work over the admin channel.
type workReleaser struct {
	engine *lending.Engine
	log    *slog.Logger
}

func (w workReleaser) ReleaseWork(_ context.Context, c admin.Caller, id uint64, upstreamStopped bool) error {
	work, err := w.engine.Registry().Release(id)
	if err != nil {
		return &admin.Error{Kind: admin.ErrNotFound, Msg: err.Error()}
	}
	w.log.Info("work released", "id", id, "upstream", work.Upstream, "borrower", work.Borrower, "state", work.State, "upstream_stopped", upstreamStopped, "account", c.Account, "via", c.Via)
	return nil
}
