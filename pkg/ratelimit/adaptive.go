package ratelimit

import (
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/pool"

	"go.uber.org/zap"
)

// Closed-loop throttling. With Config.Adaptive, a throttle signal (an HTTP 429
// or 503, a sink or a map that says it is rate limited) cuts the pool P to
// max(Min, floor(P*(100-CutPercentage)/100)), at most once per epoch however
// many signals come, and a signal with a Retry-After pauses the limiter: no
// tokens until then, those left in the epoch taken back at once. The pool
// then ramps back up as the mode says: additive increase, multiplicative
// decrease. The pool at which the signal came is the learnt ceiling: the
// climb back slows near it, holds just below it, probes above it after
// ProbeAfter and forgets it after ForgetAfter (ceiling.go).
//
// With a store, the signal goes to the store at once (a sync is brought
// forward), which decides the cut for the whole vertex and keeps the pause;
// every replica learns both at its next sync, pauses at once, and applies the
// cut from the same epoch: the first that begins at least two sync intervals
// after the store decided it, so that shares still sum to floor(P). Without a
// store the cut applies from the next epoch.

// signalState is what throttle signals did to a replica's pool and what it
// is to report of them. l.mu guards it but for cuts.
type signalState struct {
	cutFrom    int64            // epoch from which the last cut known applies
	planned    cutPlan          // a cut decided, to apply at its epoch
	pauseUntil int64            // store-clock ns before which no tokens are granted
	pending    *pool.Signal     // to report at the next sync
	last       int64            // the epoch of the last signal known, or before
	taught     int64            // the epoch of the last signal of this replica's own that teaches a ceiling
	at         int64            // how far into its epoch the first of those came, ns
	trial      pacingTrial      // the trial of pacing (accepted.go)
	recent     [lagWindow]int64 // what the downstream accepted in the last epochs, the last first (accepted.go)
	clean      int              // epochs before the last that followed a signal of this replica's own by two or more (accepted.go)
	bucket     bucketSeen       // the token bucket found downstream (accepted.go)
	drained    drain            // the last drain of that bucket (accepted.go)
	cuts       atomic.Int64
}

// cutPlan is a cut decided: from epoch from on, the pool is pool.
type cutPlan struct {
	ok         bool
	from, pool int64
	ceiling    int64 // the learnt ceiling, milli-tokens; 0 for none
	floor      int64 // a pool below it known to pass, milli-tokens; 0 for none
	epoch      int64 // the epoch of the signal
	probe      bool  // the signal came at a probe above the hold
}

// Signal tells the limiter that what the vertex protects refused work because
// it is rate limited, and asked to be left alone for retryAfter (0 when it did
// not say). With Config.Adaptive off it does nothing. Signal is cheap enough
// to call for every refused request, and safe for concurrent use; a signal
// that comes in an epoch in which a cut has not yet taken effect cuts nothing
// more, but its Retry-After still extends the pause. The pool of the epoch
// in which a signal that cuts came is the learnt ceiling (ceiling.go).
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
	ns := l.storeNanos(now)
	e := floorDiv(ns, epochNanos)
	until := int64(0)
	if retryAfter > 0 {
		until = ns + int64(retryAfter)
		l.pauseTo(until, now)
	}
	cut := l.cfg.CutPercentage > 0 && e >= l.signals.cutFrom && !l.signals.planned.ok
	ceiling, floor := l.state.Load().pool, l.passed(e)
	if !teach {
		ceiling, floor = 0, 0
	}
	l.signals.last = max(l.signals.last, e)
	if teach {
		if l.signals.taught != e {
			l.signals.at = ns - e*epochNanos
		}
		l.signals.taught = e
	}
	probe := teach && floor > 0 && l.ramp.probing(e)
	// Under a learnt ceiling, a signal at a pool above one that passed the
	// epoch before refused the climb since, not the rate: it falls back.
	_, capped := l.ramp.capAt(e)
	back := probe || (teach && floor > 0 && capped)
	if l.link.store == nil {
		if cut {
			l.signals.cutFrom = e + 1
			p := l.state.Load().pool
			l.signals.planned = cutPlan{ok: true, from: e + 1, pool: l.cutTo(p, floor, back), ceiling: ceiling, floor: floor,
				epoch: e, probe: probe}
		}
		return
	}
	if !cut && until == 0 {
		return
	}
	if l.signals.pending == nil {
		l.signals.pending = &pool.Signal{Epoch: e, Lead: 2 * l.link.interval}
	}
	if cut && !l.signals.pending.Cut {
		p := l.state.Load().pool
		l.signals.pending.Cut, l.signals.pending.Epoch, l.signals.pending.Pool = true, e, l.cutTo(p, floor, back)
		l.signals.pending.Ceiling, l.signals.pending.Floor = ceiling, floor
	}
	if until > 0 {
		l.signals.pending.PauseUntil = later(l.signals.pending.PauseUntil, time.Unix(0, until))
	}
	l.syncSoon()
}

// cutTo returns the pool a signal at pool p cuts to: p less CutPercentage,
// or, with back (a probe's signal, or any under a learnt ceiling), the rate
// floor that passed in the epoch before when it is below p, so that a probe
// or a climb the downstream refuses costs the climb and no more. A signal
// at the pool that passed (a quota that dropped) cuts.
func (l *Limiter) cutTo(p, floor int64, back bool) int64 {
	if back && floor > 0 && floor < p {
		return max(l.ramp.min, floor/milli*milli)
	}
	return l.ramp.cutOf(p)
}

// passed returns the pool of epoch e-1 when the replica called in it and
// no signal came in it: a rate the downstream took; 0 when unknown. l.mu is
// held.
func (l *Limiter) passed(e int64) int64 {
	if l.signals.last >= e-1 || !l.ramp.hasLast || l.ramp.last != e-1 {
		return 0
	}
	return l.ramp.lastPool
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pauseTo pauses the limiter until the store clock reads until (ns): the
// tokens left in the current epoch are taken back, and no epoch releases any
// before then. A pause only ever grows. l.mu is held.
func (l *Limiter) pauseTo(until int64, now time.Time) {
	if until <= l.signals.pauseUntil {
		return
	}
	l.signals.pauseUntil = until
	if until <= l.storeNanos(now) {
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
	if l.tick != nil && l.tick.Stop() {
		l.timers.Done()
		l.scheduleTick(now)
	}
}

// unhold ends st's pause: the tokens taken back and those due by now go to
// the waiting callers first. l.mu is held.
func (l *Limiter) unhold(st *epochState, now time.Time) {
	st.held = false
	if st.revoked {
		return // the lease ran out in the epoch: the tokens stay taken back
	}
	st.paused.Store(false)
	st.slice = l.sliceAt(st, now)
	if l.pacing() > 0 {
		// Paced, the slices the pause covered are not sent in a burst at
		// its end: their tokens stay withheld, and the current slice's come.
		if past := l.allowance(st.share, st.slice-1) - st.allow.Load(); st.slice > 0 && past > 0 {
			st.allow.Add(past)
			st.withheld.Add(past)
		}
		l.release(st, l.allowance(st.share, st.slice))
		return
	}
	l.hand(st, st.withheld.Swap(0))
	l.release(st, l.allowance(st.share, st.slice))
}

// applyCut makes the planned cut's pool that of epoch e. l.mu is held.
func (l *Limiter) applyCut(e int64) {
	l.ramp.cut(l.signals.planned.pool, e, l.signals.planned.ceiling, l.signals.planned.floor)
	l.signals.planned.ok = false
	l.signals.cuts.Add(1)
	l.log.Info("pool cut by a throttle signal", zap.Float64("pool", float64(l.signals.planned.pool)/milli),
		zap.Float64("ceiling", float64(l.signals.planned.ceiling)/milli), zap.Int64("fromEpoch", e))
}

// syncSoon brings the next sync forward to now, unless one is under way.
// l.mu is held.
func (l *Limiter) syncSoon() {
	if l.link.timer != nil && l.link.timer.Stop() {
		l.timers.Done()
		l.scheduleSync(0, !l.link.registered)
	}
}

// adapt applies what the store says throttle signals did: a cut not known
// yet is planned for its epoch, and the pause is joined. At the first sync,
// a cut that has already taken effect belongs to the pool's past and is not
// applied: the replica starts its own ramp. l.mu is held.
func (l *Limiter) adapt(a pool.Adaptation, stamp int64, now time.Time, first bool) {
	if !l.cfg.Adaptive {
		return
	}
	if a.From > l.signals.cutFrom {
		l.signals.cutFrom = a.From
		l.signals.last = max(l.signals.last, a.From-1)
		if !first || a.From > stamp {
			l.signals.planned = cutPlan{ok: true, from: a.From, pool: a.Pool, ceiling: a.Ceiling, floor: a.Floor}
		}
	}
	if !a.PauseUntil.IsZero() {
		l.pauseTo(a.PauseUntil.UnixNano(), now)
	}
}

// unsent puts back a signal whose sync failed, merged with any that came
// since. l.mu is held.
func (l *Limiter) unsent(s *pool.Signal) {
	if s == nil {
		return
	}
	if l.signals.pending == nil {
		l.signals.pending = s
		return
	}
	if s.Cut && (!l.signals.pending.Cut || s.Epoch < l.signals.pending.Epoch) {
		l.signals.pending.Cut, l.signals.pending.Epoch, l.signals.pending.Pool = true, s.Epoch, s.Pool
		l.signals.pending.Ceiling, l.signals.pending.Floor = s.Ceiling, s.Floor
	}
	l.signals.pending.PauseUntil = later(l.signals.pending.PauseUntil, s.PauseUntil)
}
