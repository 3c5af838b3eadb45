package ratelimit

import (
	"context"
	"time"
)

// Lane is a way into a [Limiter] for one busy caller, such as the reader of one
// partition. A lane keeps tokens it takes from the limiter in advance on a cache line
// of its own, so that lanes used by goroutines on different cores do not contend.
// Tokens a lane holds stay available to every other caller: a caller that finds the
// limiter's own tokens gone takes them from the lanes before it waits. Grants, waits
// and errors are those of the limiter's own methods.
//
// A Lane is safe for concurrent use, but it is fastest used by one goroutine.
type Lane struct {
	l    *Limiter
	slot uint32
}

// Lane returns a new lane. Lanes are spread over a fixed number of stripes (at least
// 8, and twice GOMAXPROCS up to 64); beyond that they share.
func (l *Limiter) Lane() *Lane {
	return &Lane{l: l, slot: 1 + (l.lanes.next.Add(1)-1)%uint32(l.lanes.n)}
}

// Acquire is [Limiter.Acquire] through the lane.
func (ln *Lane) Acquire(ctx context.Context, n int) (Grant, error) {
	return ln.l.acquire(ctx, n, ln.slot)
}

// TryAcquire is [Limiter.TryAcquire] through the lane.
func (ln *Lane) TryAcquire(n int) (Grant, Reason) { return ln.l.tryAcquire(n, ln.slot) }

// Deposit is [Limiter.Deposit], Settle's short form: the tokens go back to
// the lane that granted them.
func (ln *Lane) Deposit(g Grant, unused int) { ln.l.Deposit(g, unused) }

// Settle is [Limiter.Settle]: the tokens go back to the lane that granted
// them.
func (ln *Lane) Settle(g Grant, used int) Grant { return ln.l.Settle(g, used) }

// FreshAfter is [Limiter.FreshAfter].
func (ln *Lane) FreshAfter(d, margin time.Duration) (time.Duration, int64) {
	return ln.l.FreshAfter(d, margin)
}

// Epoch is [Limiter.Epoch].
func (ln *Lane) Epoch() (int64, time.Duration) { return ln.l.Epoch() }
