package ratelimit

import (
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// timerSet is a limiter's timers on its clock: the tick, which runs fire at
// the next epoch boundary, pacing slice, end of a pause or end of the lease
// (see Limiter.untilTick), and every timer callback, the tick's and the
// syncs', counted while it runs or is pending so that Close can wait for
// them. clk and fire are set once; l.mu guards tick.
type timerSet struct {
	clk  clock.Clock
	fire func()      // the tick's callback, Limiter.onTick
	tick clock.Timer // the next tick
	wg   sync.WaitGroup
}

// after runs f after d, counted until it has run.
func (t *timerSet) after(d time.Duration, f func()) clock.Timer {
	t.wg.Add(1)
	return t.clk.AfterFunc(d, func() {
		defer t.wg.Done()
		f()
	})
}

// stop stops timer tm, if it is pending, and reports whether it was.
func (t *timerSet) stop(tm clock.Timer) bool {
	if tm != nil && tm.Stop() {
		t.wg.Done()
		return true
	}
	return false
}

// arm sets the tick to fire after d, or after a millisecond when d is not
// positive: the store clock moved back under the limiter, and it looks again
// soon. l.mu is held.
func (t *timerSet) arm(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	t.tick = t.after(d, t.fire)
}

// rearm sets the pending tick anew to fire after d, when what it was armed
// by has changed (the clock, a pause): a tick already firing arms itself
// when it is done. l.mu is held.
func (t *timerSet) rearm(d time.Duration) {
	if t.stop(t.tick) {
		t.arm(d)
	}
}
