package ratelimit

import (
	"context"
	"time"
)

// Shadow is a way into a [Limiter] that, in the epochs whose config says
// [Config.Shadow] (rateLimit.shadow), never makes its caller wait: the
// limiter computes its pool, shares and grants as it would, and Shadow tops
// every grant up to what was asked. The tokens of the top-ups that callers
// keep (do not deposit) are what the limiter would have throttled:
// [Status].ShadowThrottled counts them, and [EpochSummary].ShadowThrottled
// per epoch. In the other epochs it is the limiter itself, so that shadow can
// be turned on and off with [Limiter.Update]. A Shadow is safe for concurrent
// use.
type Shadow struct {
	l    *Limiter
	lane uint32
}

// Shadow returns a shadow way into l.
func (l *Limiter) Shadow() *Shadow { return &Shadow{l: l} }

// Shadow returns a shadow way into ln's limiter, through ln.
func (ln *Lane) Shadow() *Shadow { return &Shadow{l: ln.l, lane: ln.slot} }

// TryAcquire grants n tokens in shadow: what the limiter grants, and the
// rest in shadow, with [NotThrottled]. Otherwise it is the limiter's.
func (s *Shadow) TryAcquire(n int) (Grant, Reason) {
	g, r := s.l.tryAcquire(n, s.lane)
	if !s.l.state.Load().shadowOn {
		return g, r
	}
	return s.top(g, n), NotThrottled
}

// Acquire is TryAcquire in shadow: it never waits, and fails only when ctx
// is done. Otherwise it is the limiter's.
func (s *Shadow) Acquire(ctx context.Context, n int) (Grant, error) {
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
func (s *Shadow) top(g Grant, n int) Grant {
	if v := n - g.Tokens; v > 0 {
		if g.Tokens == 0 {
			g.epoch, g.lane = s.l.state.Load().epoch, s.lane
		}
		g.shadow, g.Tokens = v, n
	}
	return g
}

// Settle accounts for a grant once its caller has used read of its tokens,
// which it does not deposit: it gives back the unused ones, the shadow ones
// first, and counts the shadow ones used as throttled in shadow. When the
// grant's epoch has ended meanwhile (a read that waited for messages), the
// limiter would have made the caller wait for the current epoch instead:
// those tokens come from the current epoch's share first, and only the rest
// counts, in the current epoch.
//
// A caller that learns only later how many of the read tokens it keeps
// (messages a function drops give theirs back, with excludeDropped) calls
// [Shadow.Trim] after the read and Settle with the trimmed grant then.
func (s *Shadow) Settle(g Grant, read int) {
	g = s.Trim(g, read)
	used := g.shadow // shadow tokens used
	if used == 0 {
		return
	}
	st := s.l.state.Load()
	if st.epoch != g.epoch {
		if r, _ := s.l.tryAcquire(used, s.lane); r.Tokens > 0 {
			used -= r.Tokens
			st = s.l.state.Load()
		}
	}
	if used > 0 {
		st.shadow.Add(int64(used))
		s.l.shadow.Add(int64(used))
	}
}

// Trim gives back the tokens of g beyond read, the shadow ones first, as
// Settle does, but counts nothing: it returns the grant of the read tokens,
// for a Settle once the caller knows how many of them it keeps.
func (s *Shadow) Trim(g Grant, read int) Grant {
	if g.Tokens <= 0 {
		return g
	}
	read = min(max(read, 0), g.Tokens)
	real := g.Tokens - g.shadow
	if unusedReal := real - min(read, real); unusedReal > 0 {
		s.l.deposit(Grant{Tokens: real, epoch: g.epoch, lane: g.lane}, unusedReal)
	}
	g.Tokens, g.shadow = read, max(read-real, 0)
	return g
}

// FreshAfter is the limiter's [Limiter.FreshAfter].
func (s *Shadow) FreshAfter(d, margin time.Duration) (time.Duration, int64) {
	return s.l.FreshAfter(d, margin)
}

// Deposit gives back unused of the limiter's own tokens of g, after
// [Shadow.Settle]: those of messages a function dropped, say.
func (s *Shadow) Deposit(g Grant, unused int) {
	if unused <= 0 || g.Tokens <= 0 {
		return
	}
	if real := g.Tokens - g.shadow; real > 0 {
		s.l.deposit(Grant{Tokens: real, epoch: g.epoch, lane: g.lane}, min(unused, real))
	}
}

// Epoch is the limiter's [Limiter.Epoch].
func (s *Shadow) Epoch() (int64, time.Duration) { return s.l.Epoch() }
