package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// NoCall in a demand list means no call in that epoch.
const NoCall = -1

// SimEpoch is one epoch of a [Simulate] run.
type SimEpoch struct {
	// Epoch counts from 1.
	Epoch int
	// Called reports whether the epoch had a call.
	Called bool
	// PoolMilli is the pool P in the epoch, in milli-tokens. For every mode but
	// Scheduled it is meaningful only when Called.
	PoolMilli int64
	// Granted is the tokens granted by the epoch's call.
	Granted int
}

// simStart is where simulations start: an epoch boundary, so that epoch i of a run
// is whole second i-1 after it.
var simStart = time.Unix(1_700_000_000, 0)

// Simulate runs a real Limiter for cfg on a manual clock, one epoch per entry of
// demand: in epoch i it acquires demand[i] tokens in one call (none when the entry
// is [NoCall]) and uses all it gets. Pacing, which changes when in an epoch tokens
// come but not how many, is left out.
func Simulate(cfg Config, demand []int) ([]SimEpoch, error) {
	cfg.Pacing = 0
	for i, d := range demand {
		if d < NoCall {
			return nil, fmt.Errorf("ratelimit: demand[%d] (%d) must not be negative", i, d)
		}
	}
	clk := clock.NewManual(simStart)
	l, err := New(cfg, WithClock(clk))
	if err != nil {
		return nil, err
	}
	defer l.Close(context.Background())

	out := make([]SimEpoch, len(demand))
	for i, d := range demand {
		e := SimEpoch{Epoch: i + 1, Called: d != NoCall}
		if e.Called {
			// TryAcquire never waits for an epoch that the manual clock would
			// never reach.
			g, _ := l.TryAcquire(d)
			e.Granted = g.Tokens
		}
		e.PoolMilli = l.Status().PoolMilli
		out[i] = e
		clk.Advance(time.Second)
	}
	return out, nil
}
