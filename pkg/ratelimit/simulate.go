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
	// Signal reports a throttle signal after the epoch's call; Cut that the
	// epoch's pool is the first after a cut, and Paused that a signal's pause
	// held its tokens back at its start (the call then comes when the pause
	// ends, if it ends within the epoch).
	Signal, Cut, Paused bool
}

// NoSignal in a signal list means no throttle signal in that epoch; 0 is a
// signal without a Retry-After, a positive duration one with that
// Retry-After.
const NoSignal = time.Duration(-1)

// simStart is where simulations start: an epoch boundary, so that epoch i of a run
// is whole second i-1 after it.
var simStart = time.Unix(1_700_000_000, 0)

// Simulate runs a real Limiter for cfg on a manual clock, one epoch per entry of
// demand: in epoch i it acquires demand[i] tokens in one call (none when the entry
// is [NoCall]) and uses all it gets. Pacing, which changes when in an epoch tokens
// come but not how many, is left out.
func Simulate(cfg Config, demand []int) ([]SimEpoch, error) {
	return SimulateSignals(cfg, demand, nil)
}

// SimulateSignals is [Simulate] with a throttle signal list: signals[i] (when
// there is one, and not [NoSignal]) is given to [Limiter.Signal] after epoch
// i's call. Signals need cfg.Adaptive to do anything.
func SimulateSignals(cfg Config, demand []int, signals []time.Duration) ([]SimEpoch, error) {
	cfg.Pacing = 0
	for i, d := range demand {
		if d < NoCall {
			return nil, fmt.Errorf("ratelimit: demand[%d] (%d) must not be negative", i, d)
		}
	}
	clk := clock.NewManual(simStart)
	cuts := map[int64]bool{}
	l, err := New(cfg, WithClock(clk), WithEpochObserver(func(s EpochSummary) { cuts[s.Epoch] = s.Cut }))
	if err != nil {
		return nil, err
	}

	out := make([]SimEpoch, len(demand))
	for i, d := range demand {
		start := clk.Now()
		e := SimEpoch{Epoch: i + 1, Called: d != NoCall}
		if until := l.Status().PausedUntil; !until.IsZero() {
			e.Paused = true
			if until.Before(start.Add(time.Second)) {
				clk.Set(until) // the call comes when the pause ends
			}
		}
		if e.Called {
			// TryAcquire never waits for an epoch that the manual clock would
			// never reach.
			g, _ := l.TryAcquire(d)
			e.Granted = g.Tokens
		}
		s := l.Status()
		e.PoolMilli = s.PoolMilli
		if i < len(signals) && signals[i] != NoSignal {
			e.Signal = true
			l.Signal(signals[i])
		}
		out[i] = e
		clk.Set(start.Add(time.Second))
	}
	l.Close(context.Background()) // the observer has seen every epoch
	for i := range out {
		out[i].Cut = cuts[simStart.Unix()+int64(i)]
	}
	return out, nil
}
