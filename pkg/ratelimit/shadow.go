package ratelimit

import "context"

// Shadow is a way into a [Limiter] that never makes its caller wait
// (rateLimit.shadow): the limiter computes its pool, shares and grants as it
// would, and Shadow tops every grant up to what was asked. The tokens of the
// top-ups that callers keep (do not deposit) are what the limiter would have
// throttled: [Status].ShadowThrottled counts them, and
// [EpochSummary].ShadowThrottled per epoch. A Shadow is safe for concurrent use.
type Shadow struct {
	l    *Limiter
	lane uint32
}

// Shadow returns a shadow way into l.
func (l *Limiter) Shadow() *Shadow { return &Shadow{l: l} }

// Shadow returns a shadow way into ln's limiter, through ln.
func (ln *Lane) Shadow() *Shadow { return &Shadow{l: ln.l, lane: ln.slot} }

// TryAcquire grants n tokens: what the limiter grants, and the rest in shadow.
// It always reports [NotThrottled].
func (s *Shadow) TryAcquire(n int) (Grant, Reason) {
	g, _ := s.l.tryAcquire(n, s.lane)
	return s.top(g, n), NotThrottled
}

// Acquire is TryAcquire: it never waits, and fails only when ctx is done.
func (s *Shadow) Acquire(ctx context.Context, n int) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	g, _ := s.TryAcquire(n)
	return g, nil
}

// top tops g up to n tokens in shadow.
func (s *Shadow) top(g Grant, n int) Grant {
	if v := n - g.Tokens; v > 0 {
		st := s.l.state.Load()
		if g.Tokens == 0 {
			g.epoch, g.lane = st.epoch, s.lane
		}
		g.shadow, g.Tokens = v, n
		if st.epoch == g.epoch {
			st.shadow.Add(int64(v))
		}
		s.l.shadow.Add(int64(v))
	}
	return g
}

// Deposit gives back unused of g's tokens: those topped up in shadow first,
// then the limiter's.
func (s *Shadow) Deposit(g Grant, unused int) {
	if unused <= 0 || g.Tokens <= 0 {
		return
	}
	if v := min(unused, g.shadow); v > 0 {
		if st := s.l.state.Load(); st.epoch == g.epoch {
			st.shadow.Add(-int64(v))
		}
		s.l.shadow.Add(-int64(v))
		unused -= v
	}
	if real := g.Tokens - g.shadow; unused > 0 && real > 0 {
		s.l.deposit(Grant{Tokens: real, epoch: g.epoch, lane: g.lane}, unused)
	}
}
