package throttle

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Pauses are told when a throttle begins and ends a wait, and why (a
// forward.Tracker). Every Begin is paired with one End.
type Pauses interface {
	Begin(r ratelimit.Reason)
	End(r ratelimit.Reason)
}

// Metrics are the counters a throttle adds to; a nil one counts nothing.
type Metrics struct {
	// Granted and Deposited count the message tokens kept and given back.
	Granted, Deposited prometheus.Counter
	// Retaken counts the tokens taken again for messages that went on in a
	// later epoch than their grant's; they are in Granted too.
	Retaken prometheus.Counter
	// Bytes and BytesDeposited count the byte tokens kept and given back.
	Bytes, BytesDeposited prometheus.Counter
	// CostErrors counts the messages whose cost expression gave no cost.
	CostErrors prometheus.Counter
}

// Env is what a throttle waits on, counts in and logs to: the forwarder's.
type Env struct {
	Pauses  Pauses // nil tells no one
	Metrics Metrics
	Logger  *zap.Logger // nil logs nothing
	Clock   clock.Clock // times the waits for an epoch; nil is the wall clock
}

// With returns a copy of t that uses e, its Limiter Noop when it has none.
// A nil t throttles nothing.
func (t *Throttle) With(e Env) *Throttle {
	c := &Throttle{Limiter: Noop{}}
	if t != nil {
		c.Limiter, c.Bytes, c.Cost, c.Groups, c.PerKey, c.Signal, c.Accepted =
			t.Limiter, t.Bytes, t.Cost, t.Groups, t.PerKey, t.Signal, t.Accepted
		if c.Limiter == nil {
			c.Limiter = Noop{}
		}
	}
	if e.Pauses == nil {
		e.Pauses = noPauses{}
	}
	if e.Logger == nil {
		e.Logger = zap.NewNop()
	}
	if e.Clock == nil {
		e.Clock = clock.Real()
	}
	for _, c := range []*prometheus.Counter{&e.Metrics.Granted, &e.Metrics.Deposited, &e.Metrics.Retaken,
		&e.Metrics.Bytes, &e.Metrics.BytesDeposited, &e.Metrics.CostErrors} {
		if *c == nil {
			*c = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
		}
	}
	c.env = e
	return c
}

type noPauses struct{}

func (noPauses) Begin(ratelimit.Reason) {}
func (noPauses) End(ratelimit.Reason)   {}

// sleep waits d on the throttle's clock or until ctx is done, and reports
// whether it waited the whole d.
func (t *Throttle) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, t.env.Clock, d)
}
