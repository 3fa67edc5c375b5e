package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/config"
	"github.com/vacancyd/vacancyd/internal/lending"
)

// upstreams implements lending.Reclaimer with each upstream's adapter: the
// engine names upstreams by id, and this finds the adapter and the target
// and credential to call.
type upstreams struct {
	cur atomic.Pointer[upstreamSet]
}

type upstreamSet struct {
	byID       map[string]reclaimTarget
	onResource map[string][]string
}

type reclaimTarget struct {
	rec adapter.Reclaimer
	up  adapter.Upstream
}

func newUpstreams(cfg *config.Config, client *http.Client) (*upstreams, error) {
	u := &upstreams{}
	return u, u.update(cfg, client)
}

// update rebuilds the set from a configuration (targets and credentials may
// change with a settings save).
func (u *upstreams) update(cfg *config.Config, client *http.Client) error {
	set := &upstreamSet{byID: map[string]reclaimTarget{}, onResource: map[string][]string{}}
	for i, up := range cfg.Upstreams {
		rec, err := adapter.ReclaimerFor(up.Kind)
		if err != nil {
			return fmt.Errorf("upstream[%d].kind: %w", i, err)
		}
		target, err := adapter.NewUpstream(up, client)
		if err != nil {
			return fmt.Errorf("upstream[%d].target: %w", i, err)
		}
		set.byID[up.ID] = reclaimTarget{rec: rec, up: target}
		set.onResource[up.Resource] = append(set.onResource[up.Resource], up.ID)
	}
	u.cur.Store(set)
	return nil
}

func (u *upstreams) get(id string) (reclaimTarget, error) {
	t, ok := u.cur.Load().byID[id]
	if !ok {
		return reclaimTarget{}, fmt.Errorf("no upstream %q", id)
	}
	return t, nil
}

func (u *upstreams) UpstreamsOn(resource string) []string {
	return append([]string(nil), u.cur.Load().onResource[resource]...)
}

func (u *upstreams) CancelJob(ctx context.Context, id, job string) (bool, error) {
	t, err := u.get(id)
	if err != nil {
		return false, err
	}
	return t.rec.CancelJob(ctx, t.up, job)
}

func (u *upstreams) JobDone(ctx context.Context, id, job string) (bool, error) {
	t, err := u.get(id)
	if err != nil {
		return false, err
	}
	return t.rec.JobDone(ctx, t.up, job)
}

func (u *upstreams) Unload(ctx context.Context, id string, models []string) error {
	t, err := u.get(id)
	if err != nil {
		return err
	}
	err = t.rec.Unload(ctx, t.up, models)
	if errors.Is(err, adapter.ErrUnsupported) {
		return fmt.Errorf("%w: %v", lending.ErrCannotUnload, err)
	}
	return err
}
