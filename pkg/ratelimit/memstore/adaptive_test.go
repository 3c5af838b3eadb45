package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// epochRecord is what the replicas of a store did in one epoch.
type epochRecord struct {
	granted int64
	pools   map[int64]bool // the pools (milli-tokens) the replicas saw
	paused  bool
}

// TestSignalReachesEveryReplica runs three replicas on a memstore, ramping to
// 90 a second, and has one of them get a throttle signal with a Retry-After
// of 1.2s: every replica is paused within a sync interval, the pool is cut to
// 45 on all of them from the same epoch, no epoch grants more than floor(P),
// and the replicas ramp back together to the hold just below the ceiling
// they all learnt, 90 less 1%.
func TestSignalReachesEveryReplica(t *testing.T) {
	cfg := ratelimit.DefaultConfig(90)
	cfg.Min, cfg.RampUpDuration, cfg.Adaptive = 10, 8*time.Second, true
	cfg.ProbeAfter = 15 * time.Second // no probe within the epochs checked
	p := newReplicas(t, cfg)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		p.join(id)
	}
	const step = ratelimit.DefaultSyncInterval
	epochs := map[int64]*epochRecord{}
	tick := func() {
		p.drain()
		for _, id := range ids {
			s := p.reps[id].l.Status()
			r := epochs[s.Epoch]
			if r == nil {
				r = &epochRecord{pools: map[int64]bool{}}
				epochs[s.Epoch] = r
			}
			r.pools[s.PoolMilli] = true
			r.paused = r.paused || !s.PausedUntil.IsZero()
		}
		p.clk.Advance(step)
	}
	for range 150 { // 15s: agreed, and ramped to 90
		tick()
	}
	if s := p.reps["a"].l.Status(); s.Pool() != 90 || s.Replicas != 3 {
		t.Fatalf("after 15s: %+v; want the pool at 90 among 3", s)
	}
	for range 3 { // 300ms into an epoch
		tick()
	}
	signalAt := p.clk.Now()
	signalEpoch := signalAt.Unix()
	p.reps["b"].l.Signal(1200 * time.Millisecond)
	p.clk.Advance(step) // one sync interval
	for _, id := range ids {
		s := p.reps[id].l.Status()
		if want := signalAt.Add(1200 * time.Millisecond); !s.PausedUntil.Equal(want) {
			t.Errorf("%s one sync interval after the signal: paused until %v; want %v", id, s.PausedUntil, want)
		}
		if g, reason := p.reps[id].l.TryAcquire(1); g.Tokens != 0 || reason != ratelimit.ReasonDownstreamThrottled {
			t.Errorf("%s: TryAcquire = %d, %v; want 0, downstream_throttled", id, g.Tokens, reason)
		}
	}
	for range 80 {
		tick()
	}

	// Per epoch, the replicas agree on P and never take more than floor(P);
	// they take all of it when not paused.
	var seq []string
	for e := signalEpoch - 1; e <= signalEpoch+6; e++ {
		r := epochs[e]
		if len(r.pools) != 1 {
			t.Fatalf("epoch %d: the replicas saw pools %v; want one", e, r.pools)
		}
		var pool int64
		for pm := range r.pools {
			pool = pm / 1000
		}
		got := p.kept[e]
		switch {
		case got > pool:
			t.Errorf("epoch %d granted %d; pool %d", e, got, pool)
		case !r.paused && got != pool:
			t.Errorf("epoch %d granted %d; want the whole pool %d", e, got, pool)
		}
		seq = append(seq, fmt.Sprintf("%d/%d", got, pool))
	}
	// The signal's epoch had its 90 taken at its start; the next one is cut to
	// 45 and paused until 0.5s into it, then the pool climbs by 10 a second.
	if want := "90/90 90/90 45/45 55/55 65/65 75/75 85/85 89/89"; fmt.Sprint(seq) != "["+want+"]" {
		t.Errorf("granted/pool from the epoch before the signal: %v; want [%s]", seq, want)
	}
	for _, id := range ids {
		if s := p.reps[id].l.Status(); s.Cuts != 1 || s.CeilingMilli != 90_000 {
			t.Errorf("%s applied %d cuts and learnt a ceiling of %d milli-tokens; want 1 and 90000, the pool the signal came at", id, s.Cuts, s.CeilingMilli)
		}
	}
}
