package serve

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// errStoppedEarly is what awaitReady returns for a vertex that stopped
// without an error before it was ready.
var errStoppedEarly = errors.New("the vertex stopped before it was ready")

// servable is nil once v is ready and its rate limit has its store's
// agreement: the store answers (its last sync succeeded) and the replicas
// agree on the pool. A role serves its socket from then on, /readyz says
// so, and its IsReady answers false with this reason while it is not nil.
func servable(v *vertex.Vertex) error {
	if err := v.Ready(); err != nil {
		return err
	}
	pv := v.PageVertex(math.MaxInt64) // the status, with no epochs
	if pv.Limit != nil && !pv.Limit.StoreUp {
		return errors.New("the rate limit's store does not answer (store_unavailable)")
	}
	for _, r := range pv.Reasons {
		switch r {
		case "store_unavailable":
			return errors.New("the rate limit's store does not answer (store_unavailable)")
		case "awaiting_agreement":
			return errors.New("the replicas have not agreed on the rate limit's pool yet (awaiting_agreement)")
		}
	}
	return nil
}

// awaitReady waits until v is servable, logging why not when the reason
// changes and every 5 s. It returns nil once v is servable or ctx is done.
// If v stops first (its Run sent on ran), it returns v's error, or
// errStoppedEarly, and sends nil on ran for the caller's receive.
func awaitReady(ctx context.Context, v *vertex.Vertex, ran chan error, log *zap.Logger) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last, lastReason := time.Time{}, ""
	for {
		err := servable(v)
		if err == nil {
			return nil
		}
		if err.Error() != lastReason || time.Since(last) > 5*time.Second {
			log.Info("not ready", zap.Error(err))
			last, lastReason = time.Now(), err.Error()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-ran:
			ran <- nil
			if err == nil {
				err = errStoppedEarly
			}
			return err
		case <-tick.C:
		}
	}
}

// readiness is what a role's server asks before it answers IsReady: v's
// servable, logged when its reason changes, so that IsReady is false while
// the store is lost or a user-defined server the vertex calls is gone.
type readiness struct {
	v     *vertex.Vertex
	log   *zap.Logger
	extra func() error // what else the role needs, when not nil

	mu   sync.Mutex
	last string // the reason IsReady last answered false with; "" once ready
}

// Ready is servable(v), then extra.
func (r *readiness) Ready() error {
	err := servable(r.v)
	if err == nil && r.extra != nil {
		err = r.extra()
	}
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason != r.last {
		if err != nil {
			r.log.Warn("IsReady answers false", zap.Error(err))
		} else {
			r.log.Info("IsReady answers true again")
		}
		r.last = reason
	}
	return err
}

// readySinker is a Sinker whose IsReady is its readiness.
type readySinker struct {
	sinker.Sinker
	*readiness
}

// readyMapQueue is the map queue whose IsReady is its readiness.
type readyMapQueue struct {
	*mapQueue
	*readiness
}
