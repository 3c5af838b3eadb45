package serve

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/vertex"
)

// errStoppedEarly is what awaitReady returns for a vertex that stopped
// without an error before it was ready.
var errStoppedEarly = errors.New("the vertex stopped before it was ready")

// servable is nil once v is ready and its rate limit has its store's
// agreement: the store answers and the replicas agree on the pool. A role
// serves its socket from then on, and /readyz says so.
func servable(v *vertex.Vertex) error {
	if err := v.Ready(); err != nil {
		return err
	}
	for _, r := range v.Status().Reasons {
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
