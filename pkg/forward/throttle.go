package forward

import (
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// reasons lists every reason a forwarder pauses for, in the order Throttled
// reports them: the limiter's, a full downstream, and a downstream that asked
// to be tried again later.
var reasons = [...]ratelimit.Reason{
	ratelimit.ReasonRateLimited, ratelimit.ReasonAwaitingAgreement,
	ratelimit.ReasonStoreUnavailable, ratelimit.ReasonDownstreamFull,
	ratelimit.ReasonDownstreamThrottled,
}

// Tracker counts the conditions that pause a forwarder. Conditions may overlap: the
// forwarder is paused while any is active, and the time each is active is added up
// per reason. It is safe for concurrent use.
type Tracker struct {
	clk clock.Clock

	mu     sync.Mutex
	active map[ratelimit.Reason]int       // how many holders of each condition
	since  map[ratelimit.Reason]time.Time // when each active condition began
	total  map[ratelimit.Reason]time.Duration
	depth  int           // conditions active, over all reasons
	change chan struct{} // closed and replaced when the set of active reasons changes
}

// NewTracker returns a tracker that reads time from clk (nil for the wall clock).
func NewTracker(clk clock.Clock) *Tracker {
	if clk == nil {
		clk = clock.Real()
	}
	return &Tracker{clk: clk, active: map[ratelimit.Reason]int{}, since: map[ratelimit.Reason]time.Time{},
		total: map[ratelimit.Reason]time.Duration{}, change: make(chan struct{})}
}

// Changed returns a channel that is closed the next time a reason becomes active
// or stops being active.
func (t *Tracker) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.change
}

func (t *Tracker) changed() {
	close(t.change)
	t.change = make(chan struct{})
}

// Begin records that a condition for reason r started. Every Begin is paired with
// one End.
func (t *Tracker) Begin(r ratelimit.Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[r] == 0 {
		t.since[r] = t.clk.Now()
		defer t.changed()
	}
	t.active[r]++
	t.depth++
}

// End records that a condition for reason ended.
func (t *Tracker) End(r ratelimit.Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[r] == 0 {
		return
	}
	t.active[r]--
	t.depth--
	if t.active[r] == 0 {
		t.total[r] += t.clk.Now().Sub(t.since[r])
		delete(t.since, r)
		t.changed()
	}
}

// Throttled reports whether any condition is active, and the reasons active now:
// rate_limited, awaiting_agreement, store_unavailable, downstream_full,
// downstream_throttled, in that order.
func (t *Tracker) Throttled() (bool, []ratelimit.Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.depth == 0 {
		return false, nil
	}
	var rs []ratelimit.Reason
	for _, r := range reasons {
		if t.active[r] > 0 {
			rs = append(rs, r)
		}
	}
	return true, rs
}

// Seconds returns how long reason has paused the forwarder in all, the current
// condition included.
func (t *Tracker) Seconds(r ratelimit.Reason) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.total[r]
	if t.active[r] > 0 {
		d += t.clk.Now().Sub(t.since[r])
	}
	return d.Seconds()
}
