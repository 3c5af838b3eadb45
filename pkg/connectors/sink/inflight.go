package sink

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// inflight is an AIMD limit on the requests a sink has in flight at once,
// between 1 and a most: a throttled answer (429, 503) halves it, at most
// once for the requests sent since the last halving, and a limit's worth
// of answers 2xx raise it by one. So when an endpoint starts refusing, the requests that follow
// its first refusal are not all sent into the wall at the configured
// concurrency; and a Retry-After holds back every request until it has
// passed. The zero value is not usable; it is safe for concurrent use.
type inflight struct {
	clk  clock.Clock
	most int

	mu      sync.Mutex
	limit   int
	oks     int // answers 2xx since the limit last changed
	busy    int
	sent    uint64        // requests started
	halved  uint64        // the value of sent at the last halving
	until   time.Time     // no request starts before, by a Retry-After
	changed chan struct{} // closed and replaced when a slot frees
}

func newInflight(most int, clk clock.Clock) *inflight {
	return &inflight{clk: clk, most: most, limit: most, changed: make(chan struct{})}
}

// acquire waits for a slot and returns the number of the request it
// starts, for release. While a Retry-After holds, it returns at once an
// [*isb.ThrottledError] with the wait left and no signal (the endpoint
// said it once: the limiter has been told); ctx's error when ctx ends.
func (f *inflight) acquire(ctx context.Context) (uint64, error) {
	for {
		f.mu.Lock()
		if wait := f.until.Sub(f.clk.Now()); wait > 0 {
			f.mu.Unlock()
			return 0, &isb.ThrottledError{RetryAfter: wait, Cause: "http sink: holding requests for the endpoint's Retry-After"}
		}
		if f.busy < f.limit {
			f.busy++
			f.sent++
			n := f.sent
			f.mu.Unlock()
			return n, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// release frees the slot of request n, whose answer was err: a throttled
// one halves the limit when n was sent after the last halving, and holds
// requests for its Retry-After; any other raises it.
func (f *inflight) release(n uint64, err error) {
	te, throttled := asThrottled(err)
	f.mu.Lock()
	f.busy--
	switch {
	case throttled:
		if n > f.halved {
			f.limit, f.halved, f.oks = max(1, f.limit/2), f.sent, 0
		}
		if te.RetryAfter > 0 {
			if until := f.clk.Now().Add(te.RetryAfter); until.After(f.until) {
				f.until = until
			}
		}
	case err == nil && f.limit < f.most:
		if f.oks++; f.oks >= f.limit {
			f.limit, f.oks = f.limit+1, 0
		}
	}
	f.notify()
	f.mu.Unlock()
}

// abandon frees a slot taken for a request that was not sent. f.mu is not
// held.
func (f *inflight) abandon() {
	f.mu.Lock()
	f.busy--
	f.notify()
	f.mu.Unlock()
}

// notify wakes the callers waiting for a slot. f.mu is held.
func (f *inflight) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// asThrottled returns err as an [*isb.ThrottledError], if it is one.
func asThrottled(err error) (*isb.ThrottledError, bool) {
	var te *isb.ThrottledError
	ok := errors.As(err, &te)
	return te, ok
}

// Limit returns the limit in force, in whole requests.
func (f *inflight) Limit() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limit
}
