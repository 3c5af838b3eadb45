package ratelimit

import (
	"sync"
	"time"
)

const epochNanos = int64(time.Second)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// untilTick is the time from now to the next tick: the next epoch boundary,
// the next pacing slice when the current epoch's share is not all allowed
// yet, the end of its pause, or the lease's end when it comes first, so that
// the tokens left are taken back then. l.mu is held.
func (l *Limiter) untilTick(now time.Time) time.Duration {
	st := l.state.Load()
	next := (st.epoch + 1) * epochNanos
	if st.closed {
		next = (l.clock.epochAt(now) + 1) * epochNanos
	} else if st.held {
		next = min(next, l.quota.signals.pauseUntil)
	} else if pace := l.quota.pacing(); pace > 0 && int64(st.slice) < l.quota.slices()-1 {
		next = st.epoch*epochNanos + int64(st.slice+1)*int64(pace)
	}
	if st.eligible && l.link.store != nil && l.link.registered {
		if end := l.clock.nanos(l.link.lease.end(l.cfg.Adaptive)); end < next && end > l.clock.nanos(now) {
			next = end
		}
	}
	return l.clock.localAt(next).Sub(now)
}

// newEpoch builds epoch e: settles the ramp, splits the pool by the membership that
// applies in e, and serves waiting callers first. l.mu is held.
func (l *Limiter) newEpoch(e int64, now time.Time) *epochState {
	if cur := l.state.Load(); cur != nil {
		// An epoch paused from start to end leaves the pool where it was.
		whole := cur.heldStart && cur.held
		if cur.called.Load() && cur.eligible && !whole {
			l.quota.recordHeld(cur.epoch, cur.pool)
			l.ramp.record(cur.epoch, cur.pool, cur.granted(), cur.share)
		}
		if whole {
			l.ramp.hold(cur.epoch, cur.pool)
		}
		l.lend.ended(cur, l.cfg.Lend)
		if l.obs.fn != nil && cur.epoch < e {
			l.obs.ended = append(l.obs.ended, cur.summary())
		}
	}
	if cur := l.state.Load(); cur != nil && cur.epoch < e {
		l.quota.ended(cur)
	}
	cut := l.quota.cutDue(e)
	if cut {
		l.quota.applyCut(&l.ramp, e)
	}
	limit, switched := l.cfg.Max*milli, false // the most tokens e may have, milli-tokens
	if cfg, ok := l.live.switchAt(e, l.cfg); ok {
		// The new ramp goes on from the pool e would have had; e has no
		// more than the smaller of the two limits.
		r := newRamp(cfg, e)
		r.resume(l.quota.poolAt(&l.ramp, e), e)
		l.ramp, l.cfg = r, cfg
		l.quota.relimit(cfg)
		limit, switched = min(limit, cfg.Max*milli), true
	}
	st := &epochState{epoch: e, pool: min(l.quota.poolAt(&l.ramp, e), limit), cut: cut, counters: newCounters(l.lanes.n),
		max: l.cfg.Max, shadowOn: l.cfg.Shadow, switched: switched}
	st.size, st.rank, st.eligible = l.member.at(e)
	if st.eligible && l.lapsed(now) {
		st.eligible, st.leaseOut = false, true
	}
	if l.quota.signals.pauseUntil > max(e*epochNanos, l.clock.nanos(now)) {
		st.held, st.heldStart, st.heldAny = true, true, true
		st.paused.Store(true)
	}
	if st.eligible {
		st.share = shareOf(st.pool, st.size, st.rank)
	}
	st.slice = l.quota.sliceAt(st, l.clock.nanos(now))
	if l.wait.len() > 0 && st.eligible {
		st.called.Store(true) // the waiting callers call in this epoch
	}
	// Published before waiting callers are served: tokens one of them gives
	// back at once must find their epoch current, or they would be dropped.
	l.state.Store(st)
	if !st.held {
		l.release(st, l.quota.allowance(st.share, st.slice))
	}
	return st
}

// summary is what the replica did in st so far.
func (st *epochState) summary() EpochSummary {
	return EpochSummary{Epoch: st.epoch, PoolMilli: st.pool, Share: st.share,
		Granted: st.granted(), Replicas: st.size, Rank: st.rank, Eligible: st.eligible,
		Cut: st.cut, Paused: st.heldAny, ShadowThrottled: st.shadow.Load(),
		Max: st.max, Shadow: st.shadowOn, Switched: st.switched}
}

// release raises st's allowance to allow: the new tokens go to waiting callers
// first, in arrival order, and the rest to the common counter. l.mu is held.
func (l *Limiter) release(st *epochState, allow int64) {
	if st.revoked {
		return
	}
	budget := allow - st.allow.Load()
	if budget <= 0 {
		return
	}
	st.allow.Store(allow)
	l.wait.hand(st, budget)
}

// onTick runs at each epoch boundary, pacing slice, end of a pause and end
// of the lease.
func (l *Limiter) onTick() {
	l.mu.Lock()
	defer l.notifyEnded()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	now := l.clk.Now()
	st := l.state.Load()
	if e := l.clock.epochAt(now); e > st.epoch {
		l.state.Store(l.newEpoch(e, now))
	} else if st.eligible && l.lapsed(now) {
		st.revoke()
	} else if st.held {
		if l.clock.nanos(now) >= l.quota.signals.pauseUntil {
			l.unhold(st, now)
		}
	} else if k := l.quota.sliceAt(st, l.clock.nanos(now)); k > st.slice {
		st.slice = k
		l.release(st, l.quota.allowance(st.share, k))
	}
	l.timers.arm(l.untilTick(now))
}

// catchUp begins the epoch now falls in when the timer has not yet, as
// after the process was frozen past an epoch's end: the epoch's tokens must
// be of the epoch, whichever goroutine runs first. It reports whether it
// began one, whose predecessor's summary is then to be handed to the
// observer (notifyEnded) once l.mu is released. l.mu is held.
func (l *Limiter) catchUp(now time.Time) bool {
	if l.closed {
		return false
	}
	e := l.clock.epochAt(now)
	if e <= l.state.Load().epoch {
		return false
	}
	l.state.Store(l.newEpoch(e, now))
	l.timers.rearm(l.untilTick(now))
	return true
}

// retime follows a step of the local clock against the store's, learned at a
// sync: the epoch now falls in begins when it is later than the one in use,
// or when it is earlier and nothing was granted in the one in use (its
// tokens would be granted twice otherwise: a replica whose clock jumped
// ahead waits for the store's clock to reach its epoch). l.mu is held.
func (l *Limiter) retime(now time.Time) {
	st := l.state.Load()
	if e := l.clock.epochAt(now); e > st.epoch || (e < st.epoch && !st.eligible && st.granted() == 0) {
		l.state.Store(l.newEpoch(e, now))
	}
	l.timers.rearm(l.untilTick(now))
}

// Epoch returns the current epoch, by the store clock, and the time left in
// it. When the limiter's timer has not yet begun that epoch (the process was
// frozen or starved of CPU past the end of the last one) Epoch begins it
// first, so that the tokens granted from then on are the current epoch's. A
// caller that holds a [Grant] of an earlier epoch holds tokens that must not
// be spent any more: they were the share of a second that has passed, and
// spent now they would come on top of this second's.
//
// Acquire and TryAcquire read no clock while tokens are left: after a freeze,
// until the timer or a call of Epoch catches up, they may still grant what
// was left of the epoch before it. A caller that may have waited across an
// epoch's end (on a read, on a write) compares [Grant.Epoch] with Epoch
// before it spends the tokens.
func (l *Limiter) Epoch() (epoch int64, left time.Duration) {
	now := l.clk.Now()
	ns := l.clock.nanos(now)
	e := floorDiv(ns, epochNanos)
	if st := l.state.Load(); e > st.epoch && !st.closed {
		l.mu.Lock()
		began := l.catchUp(now)
		l.mu.Unlock()
		if began {
			l.notifyEnded()
		}
	}
	return e, time.Duration((e+1)*epochNanos - ns)
}

// observer is the epoch observer of WithEpochObserver and the summaries it
// is yet to be handed. l.mu guards ended; mu serialises the calls, which the
// timer and a caller that brings a late epoch up to date may both make.
type observer struct {
	fn    func(EpochSummary)
	ended []EpochSummary
	mu    sync.Mutex
}

// notifyEnded hands the summaries of ended epochs to the observer, outside
// l.mu, in order and one call at a time.
func (l *Limiter) notifyEnded() {
	if l.obs.fn == nil {
		return
	}
	l.obs.mu.Lock()
	defer l.obs.mu.Unlock()
	l.mu.Lock()
	ended := l.obs.ended
	l.obs.ended = nil
	l.mu.Unlock()
	for _, s := range ended {
		l.obs.fn(s)
	}
}

// FreshAfter returns the wait, at least d, after which at least margin of an
// epoch is left on the store clock, and that epoch: d itself when the epoch
// at the end of d has margin left, else the wait until the next epoch
// begins. A forwarder that waited for a throttled downstream waits this
// instead, and takes tokens for the messages it sends again only from that
// epoch or a later one (see [Grant.Epoch]): sent on the tokens of an epoch
// about to end, or of one that has just ended but not yet been renewed, they
// would reach the downstream in the next second, on top of that second's
// grant.
func (l *Limiter) FreshAfter(d, margin time.Duration) (time.Duration, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.nanos(l.clk.Now())
	at := now + int64(max(d, 0))
	e := floorDiv(at, epochNanos)
	if (e+1)*epochNanos-at < int64(margin) {
		e++
		at = e * epochNanos
	}
	return time.Duration(at - now), e
}
