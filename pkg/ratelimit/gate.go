package ratelimit

import (
	"context"
	"time"
)

// Gate is the way a vertex's forwarder takes tokens from a [Limiter]: it
// enforces the limit, except in the epochs whose config says [Config.Shadow]
// (rateLimit.shadow), where it never makes its caller wait: the limiter
// computes its pool, shares and grants as it would, and the Gate tops every
// grant up to what was asked. The tokens of the top-ups that callers keep
// are what the limiter would have throttled: [Status].ShadowThrottled counts
// them, and [EpochSummary].ShadowThrottled per epoch. Because shadow is a
// per-epoch setting, [Limiter.Update] can turn it on and off while the Gate
// is in use.
//
// A Gate is safe for concurrent use. Get one with [Limiter.Gate], or
// [Lane.Gate] for a caller that acquires in a loop beside others.
type Gate struct {
	l    *Limiter
	lane uint32
}

// Gate returns a gate into l.
func (l *Limiter) Gate() *Gate { return &Gate{l: l} }

// Gate returns a gate into ln's limiter, through ln.
func (ln *Lane) Gate() *Gate { return &Gate{l: ln.l, lane: ln.slot} }

// TryAcquire is [Limiter.TryAcquire]; in shadow it grants n tokens, what the
// limiter grants and the rest in shadow, with [NotThrottled].
func (s *Gate) TryAcquire(n int) (Grant, Reason) {
	g, r := s.l.tryAcquire(n, s.lane)
	if !s.l.state.Load().shadowOn {
		return g, r
	}
	return s.top(g, n), NotThrottled
}

// Acquire is [Limiter.Acquire]; in shadow it is TryAcquire: it never waits,
// and fails only when ctx is done.
func (s *Gate) Acquire(ctx context.Context, n int) (Grant, error) {
	if !s.l.state.Load().shadowOn {
		return s.l.acquire(ctx, n, s.lane)
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	g, _ := s.TryAcquire(n)
	return g, nil
}

// top tops g up to n tokens in shadow.
func (s *Gate) top(g Grant, n int) Grant {
	if v := n - g.Tokens; v > 0 {
		if g.Tokens == 0 {
			g.epoch, g.from.lane = s.l.state.Load().epoch, s.lane
		}
		g.shadow, g.Tokens = v, n
	}
	return g
}

// Settle keeps used of g's tokens and gives the others back, those granted in
// shadow first; it returns the grant of the tokens kept. The tokens granted
// in shadow that are kept count as throttled in shadow, in g's epoch. A
// caller that learns only later that it keeps fewer (messages a function
// dropped give theirs back, with excludeDropped) settles the returned grant
// again with the smaller number: what it gives back then no longer counts.
// Real tokens go back to g's epoch, and are dropped when it has ended (see
// [Limiter.Settle]).
func (s *Gate) Settle(g Grant, used int) Grant {
	used = min(max(used, 0), max(g.Tokens, 0))
	back := g.Tokens - used
	backShadow := min(g.shadow, back)
	if backReal := back - backShadow; backReal > 0 {
		s.l.deposit(Grant{Tokens: g.Tokens - g.shadow, epoch: g.epoch, from: g.from}, backReal)
	}
	kept := g.shadow - backShadow
	switch {
	case !g.from.settled:
		s.countShadow(g.epoch, int64(kept))
	case backShadow > 0:
		s.countShadow(g.epoch, -int64(backShadow))
	}
	return Grant{Tokens: used, epoch: g.epoch, from: grantFrom{lane: g.from.lane, settled: true}, shadow: kept}
}

// countShadow counts n tokens kept in shadow (less when n is negative), in
// epoch e while it is current, and in all.
func (s *Gate) countShadow(e int64, n int64) {
	if n == 0 {
		return
	}
	if st := s.l.state.Load(); st.epoch == e {
		st.shadow.Add(n)
	}
	s.l.shadow.Add(n)
}

// Epoch is the limiter's [Limiter.Epoch].
func (s *Gate) Epoch() (int64, time.Duration) { return s.l.Epoch() }

// FreshAfter is the limiter's [Limiter.FreshAfter].
func (s *Gate) FreshAfter(d, margin time.Duration) (time.Duration, int64) {
	return s.l.FreshAfter(d, margin)
}
