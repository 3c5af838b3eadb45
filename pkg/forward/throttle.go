package forward

import (
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Reason is why a forwarder is paused. The values are the metric label values.
type Reason string

// The reasons a forwarder pauses.
const (
	RateLimited       Reason = "rate_limited"       // the epoch's share is used up
	AwaitingAgreement Reason = "awaiting_agreement" // the replicas have not agreed on the pool yet
	StoreUnavailable  Reason = "store_unavailable"  // the limiter's store is down past its lease
	DownstreamFull    Reason = "downstream_full"    // the sink or the next buffer is full
)

// Reasons lists every Reason, for metrics.
var Reasons = []Reason{RateLimited, AwaitingAgreement, StoreUnavailable, DownstreamFull}

// Tracker counts the conditions that pause a forwarder. Conditions may overlap: the
// forwarder is paused while any is active, and the time each is active is added up
// per reason. It is safe for concurrent use.
type Tracker struct {
	clk clock.Clock

	mu     sync.Mutex
	active map[Reason]int       // how many holders of each condition
	since  map[Reason]time.Time // when each active condition began
	total  map[Reason]time.Duration
	depth  int           // conditions active, over all reasons
	change chan struct{} // closed and replaced when the set of active reasons changes
}

// NewTracker returns a tracker that reads time from clk (nil for the wall clock).
func NewTracker(clk clock.Clock) *Tracker {
	if clk == nil {
		clk = clock.Real()
	}
	return &Tracker{clk: clk, active: map[Reason]int{}, since: map[Reason]time.Time{},
		total: map[Reason]time.Duration{}, change: make(chan struct{})}
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

// Begin records that a condition for reason started. Every Begin is paired with one
// End.
func (t *Tracker) Begin(r Reason) {
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
func (t *Tracker) End(r Reason) {
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

// Throttled reports whether any condition is active, and the reasons active now in
// the order of [Reasons].
func (t *Tracker) Throttled() (bool, []Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.depth == 0 {
		return false, nil
	}
	var rs []Reason
	for _, r := range Reasons {
		if t.active[r] > 0 {
			rs = append(rs, r)
		}
	}
	return true, rs
}

// Seconds returns how long reason has paused the forwarder in all, the current
// condition included.
func (t *Tracker) Seconds(r Reason) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.total[r]
	if t.active[r] > 0 {
		d += t.clk.Now().Sub(t.since[r])
	}
	return d.Seconds()
}
