package vertex

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// pendingPoll is how often the vertex asks its source how many messages are
// pending, and pendingTimeout how long it waits for the answer.
const (
	pendingPoll    = 5 * time.Second
	pendingTimeout = 2 * time.Second
)

// pendingSource is a source that can tell how many messages it has pending:
// a user-defined source, Kafka (the group's lag), NATS (messages held),
// JetStream (the consumer's). Pending returns a negative count, with or without an
// error, when it cannot tell.
type pendingSource interface {
	Pending(ctx context.Context) (int64, error)
}

// ownPending is a pendingSource whose count is the replica's part of the
// source's (Kafka's partitions it owns, what a NATS source holds), not the
// whole source's.
type ownPending interface {
	OwnPending() bool
}

// groupPendingSource is a source whose replicas each tell their part of the
// pending count (Pending) and can also tell the whole source's: Kafka's
// group lag over every partition.
type groupPendingSource interface {
	GroupPending(ctx context.Context) (int64, error)
}

// buildPending registers the gauge sluice_source_pending for a source r that
// can tell its pending count, at -1 (unknown) until the first answer.
func (v *Vertex) buildPending(reg prometheus.Registerer, r isb.Reader) {
	p, ok := r.(pendingSource)
	if !ok {
		return
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_source_pending",
		Help: "Messages the source has pending (not read yet, or due again), asked every 5s; -1 while unknown."})
	g.Set(-1)
	v.lastPending.Store(-1)
	reg.MustRegister(g)
	v.pending, v.pendingGauge = p, g
	if o, ok := r.(ownPending); ok {
		v.pendingOwn = o.OwnPending()
	}
	v.groupPending.Store(-1)
	if gp, ok := r.(groupPendingSource); ok {
		v.pendingGroup = gp
	}
}

// pollPending sets the pending gauge from the source at once and then every
// pendingPoll, until ctx ends: -1 when the source cannot tell or the call fails.
func (v *Vertex) pollPending(ctx context.Context) {
	for {
		pctx, cancel := context.WithTimeout(ctx, pendingTimeout)
		n, err := v.pending.Pending(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			v.log.Debug("the source did not tell its pending count", zap.Error(err))
		}
		if err != nil || n < 0 {
			n = -1
		}
		v.pendingGauge.Set(float64(n))
		v.lastPending.Store(n)
		if gp := v.pendingGroup; gp != nil {
			v.groupPending.Store(v.askGroupPending(ctx, gp))
		}
		if !sleep(ctx, v.o.clock, pendingPoll) {
			return
		}
	}
}

// askGroupPending asks gp for the whole source's pending count: -1 when it
// cannot tell or the call fails.
func (v *Vertex) askGroupPending(ctx context.Context, gp groupPendingSource) int64 {
	pctx, cancel := context.WithTimeout(ctx, pendingTimeout)
	defer cancel()
	n, err := gp.GroupPending(pctx)
	if err != nil {
		v.log.Debug("the source did not tell the group's pending count", zap.Error(err))
		return -1
	}
	return max(n, -1)
}

// sourcePending returns the whole source's pending count, and false when it
// is not known: the group's where the source tells it (Kafka), else what the
// source tells when each replica sees the whole (a user-defined source,
// JetStream, SQS); not known for a source whose replicas each see their part
// only (core NATS).
func (v *Vertex) sourcePending() (int64, bool) {
	if v.pendingGroup != nil {
		n := v.groupPending.Load()
		return n, n >= 0
	}
	if v.pendingOwn || v.pendingGauge == nil {
		return -1, false
	}
	n := v.lastPending.Load()
	return n, n >= 0
}
