package ratelimit

import (
	"time"

	"go.uber.org/zap"
)

// Signal tells the limiter that what the vertex protects refused work because
// it is rate limited, and asked to be left alone for retryAfter (0 when it did
// not say). With Config.Adaptive off it does nothing. Signal is cheap enough
// to call for every refused request, and safe for concurrent use; a signal
// that comes in an epoch in which a cut has not yet taken effect cuts nothing
// more, but its Retry-After still extends the pause. The pool of the epoch
// in which a signal that cuts came is the learnt ceiling that caps the climb back.
func (l *Limiter) Signal(retryAfter time.Duration) { l.signal(retryAfter, true) }

// SignalUnavailable tells the limiter that what the vertex protects is
// unavailable (an HTTP 503: down or overloaded, not over a quota), and asked
// to be left alone for retryAfter (0 when it did not say). It cuts and
// pauses as [Limiter.Signal] does, but teaches no ceiling: the pool climbs
// back towards the ceiling learnt before, so that a short outage does not
// leave the vertex below its quota.
func (l *Limiter) SignalUnavailable(retryAfter time.Duration) { l.signal(retryAfter, false) }

// signal is Signal, and SignalUnavailable without teach.
func (l *Limiter) signal(retryAfter time.Duration, teach bool) {
	if !l.cfg.Adaptive {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	now := l.clk.Now()
	ns := l.clock.nanos(now)
	until := int64(0)
	if retryAfter > 0 {
		until = ns + int64(retryAfter)
		l.pauseTo(until, now)
	}
	if l.quota.signal(&l.ramp, ns, l.state.Load().pool, teach, until, 2*l.link.interval) {
		l.syncSoon()
	}
}

// pauseTo pauses the limiter until the store clock reads until (ns): the
// tokens left in the current epoch are taken back, and no epoch releases any
// before then. A pause only ever grows. l.mu is held.
func (l *Limiter) pauseTo(until int64, now time.Time) {
	if until <= l.quota.signals.pauseUntil {
		return
	}
	l.quota.signals.pauseUntil = until
	if until <= l.clock.nanos(now) {
		return
	}
	st := l.state.Load()
	if st.closed || st.held {
		return // a held epoch's tick looks at pauseUntil when it fires
	}
	st.held, st.heldAny = true, true
	st.paused.Store(true)
	st.withheld.Add(st.drain())
	l.log.Debug("paused by a throttle signal", zap.Time("until", time.Unix(0, until)))
	// The next tick may be a pacing slice or the epoch's end: bring it to the
	// pause's end. A tick already firing waits for l.mu and then sees it.
	l.timers.rearm(l.untilTick(now))
}

// unhold ends st's pause: the tokens taken back and those due by now go to
// the waiting callers first. l.mu is held.
func (l *Limiter) unhold(st *epochState, now time.Time) {
	st.held = false
	if st.revoked {
		return // the lease ran out in the epoch: the tokens stay taken back
	}
	st.paused.Store(false)
	st.slice = l.quota.sliceAt(st, l.clock.nanos(now))
	if l.quota.pacing() > 0 {
		// Paced, the slices the pause covered are not sent in a burst at
		// its end: their tokens stay withheld, and the current slice's come.
		if past := l.quota.allowance(st.share, st.slice-1) - st.allow.Load(); st.slice > 0 && past > 0 {
			st.allow.Add(past)
			st.withheld.Add(past)
		}
		l.release(st, l.quota.allowance(st.share, st.slice))
		return
	}
	l.wait.hand(st, st.withheld.Swap(0))
	l.release(st, l.quota.allowance(st.share, st.slice))
}

// syncSoon brings the next sync forward to now, unless one is under way.
// l.mu is held.
func (l *Limiter) syncSoon() {
	if l.timers.stop(l.link.timer) {
		l.scheduleSync(0, !l.link.registered)
	}
}
