package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
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
	// Max is the limit in force, and Switched is true in the first epoch of
	// a [SimChange].
	Max      int64
	Switched bool
	// Accepted and Refused are what the scenario's Downstream did with the
	// tokens granted, when it has one.
	Accepted, Refused int
}

// SimChange is a live change of the limit in a simulation: the config is
// given to [ratelimit.Limiter.Update] in the epoch before Epoch, after its call, so
// that Epoch is the first under it, the switching epoch.
type SimChange struct {
	Epoch  int
	Config ratelimit.Config
}

// NoSignal in a signal list means no throttle signal in that epoch; 0 is a
// signal without a Retry-After, a positive duration one with that
// Retry-After.
const NoSignal = time.Duration(-1)

// simStart is where simulations start: an epoch boundary, so that epoch i of a run
// is whole second i-1 after it.
var simStart = time.Unix(1_700_000_000, 0)

// Scenario is what happens to a simulated limiter, epoch by epoch: the tokens
// asked, the throttle signals after the calls, and live changes of the limit.
type Scenario struct {
	// Demand is the tokens asked in each epoch, in one call; [NoCall] for
	// an epoch without a call. Its length is the simulation's.
	Demand []int
	// Signals[i], when there is one and it is not [NoSignal], is given to
	// [ratelimit.Limiter.Signal] after epoch i's call. Signals need Config.Adaptive to do
	// anything; nil is none.
	Signals []time.Duration
	// Changes are live changes of the limit, as a replica applies a change of
	// its config file (see [ratelimit.Limiter.Update]). A change's epoch must be 2 or
	// more and within Demand, and its config may differ from the first only
	// where [ratelimit.Limiter.Update] allows.
	Changes []SimChange
	// Downstream, when not nil, is sent the tokens granted in each epoch;
	// when it refuses some it is a throttle signal with its Retry-After,
	// unless Signals has an entry for the epoch.
	Downstream Downstream
}

// Simulate runs a real Limiter for cfg on a manual clock through a scenario,
// one epoch per entry of sc.Demand: in epoch i it acquires sc.Demand[i]
// tokens in one call and uses all it gets, and tells the limiter what the
// Downstream accepted of them. Pacing, which changes when in an epoch tokens
// come but not how many, is left out, and so is the pacing a limiter learns
// from a downstream that refuses bursts.
func Simulate(cfg ratelimit.Config, sc Scenario) ([]SimEpoch, error) {
	demand, signals, changes := sc.Demand, sc.Signals, sc.Changes
	cfg.Pacing = 0
	for i, d := range demand {
		if d < NoCall {
			return nil, fmt.Errorf("ratelimit: demand[%d] (%d) must not be negative", i, d)
		}
	}
	at := map[int]ratelimit.Config{}
	for _, c := range changes {
		if c.Epoch < 2 || c.Epoch > len(demand) {
			return nil, fmt.Errorf("ratelimit: a change at epoch %d: want an epoch from 2 to %d", c.Epoch, len(demand))
		}
		c.Config.Pacing = 0
		at[c.Epoch] = c.Config
	}
	clk := clock.NewManual(simStart)
	cuts, switched := map[int64]bool{}, map[int64]bool{}
	l, err := ratelimit.New(cfg, ratelimit.WithClock(clk), ratelimit.WithoutPacing(), ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) { cuts[s.Epoch], switched[s.Epoch] = s.Cut, s.Switched }))
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
		e.PoolMilli, e.Max = s.PoolMilli, s.Max
		var refused bool
		var retryAfter time.Duration
		if sc.Downstream != nil && e.Called {
			e.Accepted, refused, retryAfter = sc.Downstream.Take(i+1, e.Granted)
			e.Refused = e.Granted - e.Accepted
			l.Accepted(e.Accepted)
		}
		switch {
		case i < len(signals) && signals[i] != NoSignal:
			e.Signal = true
			l.Signal(signals[i])
		case refused:
			e.Signal = true
			l.Signal(retryAfter)
		}
		if c, ok := at[i+2]; ok {
			if err := l.Update(c); err != nil {
				l.Close(context.Background())
				return nil, fmt.Errorf("ratelimit: the change at epoch %d: %w", i+2, err)
			}
		}
		out[i] = e
		clk.Set(start.Add(time.Second))
	}
	l.Close(context.Background()) // the observer has seen every epoch
	for i := range out {
		out[i].Cut = cuts[simStart.Unix()+int64(i)]
		out[i].Switched = switched[simStart.Unix()+int64(i)]
	}
	return out, nil
}
