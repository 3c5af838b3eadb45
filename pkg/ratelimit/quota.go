package ratelimit

import (
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/zap"
)

// quota is what a Limiter learns of the quota of what the vertex protects,
// with Config.Adaptive: the closed loop. Its rules, each a method:
//
//   - a cut (signal, applyCut): a throttle signal (an HTTP 429 or 503, a
//     sink or a map that says it is rate limited) cuts the pool P to
//     max(Min, floor(P*(100-CutPercentage)/100)) (cutOf), at most once per
//     epoch however many signals come; a Retry-After pauses the limiter
//     until then (Limiter.pauseTo). The ramp then climbs back as the mode
//     says: additive increase, multiplicative decrease;
//   - the ceiling (learn, capAt): the pool at which the signal came caps
//     the climb back, which holds just below it and probes above it
//     after ProbeAfter, until ForgetAfter (see [ceiling]); a signal at a
//     probe, or at a climb under the ceiling, falls back to the rate that
//     passed the epoch before (cutTo);
//   - what the downstream accepted (ended): a replica's own cut learns a
//     fixed window's quota exactly (learnWindow), or a lagging
//     downstream's rate (learnLag);
//   - the pacing trial (tryPacing): at its first signal a replica sends
//     the refused pool again, paced, and keeps pacing when that passes;
//   - bucket learning (learnBucket): paced, the drains of a token bucket
//     downstream tell its rate, and two of them its burst.
//
// With a store, the signal goes to the store at once (a sync is brought
// forward, Limiter.syncSoon), which decides the cut and its ceiling for the
// whole vertex and keeps the pause; every replica learns both at its next
// sync (adapt), pauses at once, and applies the cut from the same epoch: the
// first that begins at least two sync intervals after the store decided it,
// so that shares still sum to floor(P). Without a store the cut applies
// from the next epoch.
//
// A quota is not safe for concurrent use: the Limiter calls it with l.mu
// held, but for Accepted's counter (accepting) and the cuts' count.
type quota struct {
	cfg     quotaConfig
	log     *zap.Logger
	signals signalState
	// ceil is the ceiling the last cut taught, if any (ceiling.go).
	ceil ceiling
	// paced is whether the limiter paces its grants (configured, or kept
	// after its trial) without a store: the probes above the hold climb by
	// one more gap each epoch, and back off while they are refused.
	paced bool
	// bucket is the burst of the token bucket a paced replica found
	// downstream, milli-tokens; 0 for none known.
	bucket int64
	// trialPool is the pool a trial of pacing sends again, milli-tokens:
	// the pool stays there until the trial is judged; 0 for none.
	trialPool int64
	trial     pacingTrial
	seen      acceptance
	accepting atomic.Bool // Accepted has been called
}

// quotaConfig is what a quota is told of the limiter's config.
type quotaConfig struct {
	adaptive    bool
	pacing      time.Duration // Config.Pacing
	unpaced     bool          // WithoutPacing: no pacing, configured or learnt
	shared      bool          // a store decides the cuts
	min, max    int64         // the ramp's bounds, milli-tokens
	cutPct      int64         // percent of the pool a throttle signal takes off
	holdPct     int64         // percent below the learnt ceiling the pool holds at
	probeAfter  int64         // epochs from a cut before the pool probes above the hold
	forgetAfter int64         // epochs from a cut after which its ceiling is forgotten
}

func newQuotaConfig(c Config, shared, unpaced bool) quotaConfig {
	return quotaConfig{
		adaptive: c.Adaptive, pacing: c.Pacing, unpaced: unpaced, shared: shared,
		min: c.Min * milli, max: c.Max * milli,
		cutPct:      int64(c.CutPercentage),
		holdPct:     int64(c.HoldBelowPercentage),
		probeAfter:  int64(c.ProbeAfter / time.Second),
		forgetAfter: int64((c.ForgetAfter + time.Second - 1) / time.Second),
	}
}

// relimit takes the bounds of c, a live change of the limit that begins:
// the ceiling stays, and the pacing the cap follows (paced, bucket, the
// trial's pool) is looked at again when the epoch ends.
func (q *quota) relimit(c Config) {
	q.cfg.min, q.cfg.max = c.Min*milli, c.Max*milli
	q.paced, q.bucket, q.trialPool = false, 0, 0
}

// signalState is what throttle signals did to a replica's pool and what it
// is to report of them.
type signalState struct {
	cutFrom    int64         // epoch from which the last cut known applies
	planned    cutPlan       // a cut decided, to apply at its epoch
	pauseUntil int64         // store-clock ns before which no tokens are granted
	pending    *share.Signal // to report at the next sync
	last       int64         // the epoch of the last signal known, or before
	taught     int64         // the epoch of the last signal of this replica's own that teaches a ceiling
	at         int64         // how far into its epoch the first of those came, ns
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

// poolAt returns the pool of epoch e: r's, under the learnt cap, within
// [Min, Max]. From the hold, a probe climbs as the mode does, but not
// slower.
func (q *quota) poolAt(r *ramp, e int64) int64 {
	p, ok := r.poolAt(e)
	if !ok {
		return p
	}
	if r.mode != Scheduled {
		if c, ok := q.capAt(e); ok && p > r.lastPool && r.lastPool >= q.holdOf(q.ceil) && q.probing(e) {
			p = max(p, c)
		}
	}
	return r.clamp(q.capped(p, e))
}

// signal decides what a signal at store-clock ns, in epoch e whose pool is
// p, does: without a store it plans the cut; with one it makes the report
// for the store, and says whether to sync now. teach is false for a signal
// that teaches no ceiling (SignalUnavailable); until is the end of the pause
// it asks for (ns; 0 for none) and lead the report's.
func (q *quota) signal(r *ramp, ns, p int64, teach bool, until int64, lead time.Duration) (syncNow bool) {
	e := floorDiv(ns, epochNanos)
	cut := q.cfg.cutPct > 0 && e >= q.signals.cutFrom && !q.signals.planned.ok
	ceiling, floor := p, q.passed(r, e)
	if !teach {
		ceiling, floor = 0, 0
	}
	q.signals.last = max(q.signals.last, e)
	if teach {
		if q.signals.taught != e {
			q.signals.at = ns - e*epochNanos
		}
		q.signals.taught = e
	}
	probe := teach && floor > 0 && q.probing(e)
	// Under a learnt ceiling, a signal at a pool above one that passed the
	// epoch before refused the climb since, not the rate: it falls back.
	_, capped := q.capAt(e)
	back := probe || (teach && floor > 0 && capped)
	if !q.cfg.shared {
		if cut {
			q.signals.cutFrom = e + 1
			q.signals.planned = cutPlan{ok: true, from: e + 1, pool: q.cutTo(p, floor, back), ceiling: ceiling, floor: floor,
				epoch: e, probe: probe}
		}
		return false
	}
	if !cut && until == 0 {
		return false
	}
	s := q.signals.pending
	if s == nil {
		s = &share.Signal{Epoch: e, Lead: lead}
		q.signals.pending = s
	}
	if cut && !s.Cut {
		s.Cut, s.Epoch, s.Pool = true, e, q.cutTo(p, floor, back)
		s.Ceiling, s.Floor = ceiling, floor
	}
	if until > 0 {
		s.PauseUntil = later(s.PauseUntil, time.Unix(0, until))
	}
	return true
}

// cutOf returns the pool a throttle signal leaves of p (milli-tokens):
// max(min, floor(p*(100-cutPct)/100)), in whole tokens.
func (q *quota) cutOf(p int64) int64 {
	return max(q.cfg.min, mulDiv(p, 100-q.cfg.cutPct, 100)/milli*milli)
}

// cutTo returns the pool a signal at pool p cuts to: p less CutPercentage,
// or, with back (a probe's signal, or any under a learnt ceiling), the rate
// floor that passed in the epoch before when it is below p, so that a probe
// or a climb the downstream refuses costs the climb and no more. A signal
// at the pool that passed (a quota that dropped) cuts.
func (q *quota) cutTo(p, floor int64, back bool) int64 {
	if back && floor > 0 && floor < p {
		return max(q.cfg.min, floor/milli*milli)
	}
	return q.cutOf(p)
}

// passed returns the pool of epoch e-1 when the replica called in it and
// no signal came in it: a rate the downstream took; 0 when unknown.
func (q *quota) passed(r *ramp, e int64) int64 {
	if q.signals.last >= e-1 || !r.hasLast || r.last != e-1 {
		return 0
	}
	return r.lastPool
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cutDue reports whether the planned cut applies from epoch e.
func (q *quota) cutDue(e int64) bool { return q.signals.planned.ok && e >= q.signals.planned.from }

// applyCut makes the planned cut's pool that of epoch e in r, and learns
// its ceiling.
func (q *quota) applyCut(r *ramp, e int64) {
	c := q.signals.planned
	p := r.clamp(c.pool)
	q.learn(c.ceiling, c.floor, p, e)
	r.cut(p, e)
	q.signals.planned.ok = false
	q.signals.cuts.Add(1)
	q.log.Info("pool cut by a throttle signal", zap.Float64("pool", float64(c.pool)/milli),
		zap.Float64("ceiling", float64(c.ceiling)/milli), zap.Int64("fromEpoch", e))
}

// adapt learns what the store says throttle signals did: a cut not known
// yet is planned for its epoch. At the first sync, a cut that has already
// taken effect belongs to the pool's past and is not applied: the replica
// starts its own ramp. It returns the end of the pause to join (ns; 0 for
// none).
func (q *quota) adapt(a share.Adaptation, stamp int64, first bool) (pauseUntil int64) {
	if !q.cfg.adaptive {
		return 0
	}
	if a.From > q.signals.cutFrom {
		q.signals.cutFrom = a.From
		q.signals.last = max(q.signals.last, a.From-1)
		if !first || a.From > stamp {
			q.signals.planned = cutPlan{ok: true, from: a.From, pool: a.Pool, ceiling: a.Ceiling, floor: a.Floor}
		}
	}
	if a.PauseUntil.IsZero() {
		return 0
	}
	return a.PauseUntil.UnixNano()
}

// unsent puts back a signal whose sync failed, merged with any that came
// since.
func (q *quota) unsent(s *share.Signal) {
	if s == nil {
		return
	}
	p := q.signals.pending
	if p == nil {
		q.signals.pending = s
		return
	}
	if s.Cut && (!p.Cut || s.Epoch < p.Epoch) {
		p.Cut, p.Epoch, p.Pool = true, s.Epoch, s.Pool
		p.Ceiling, p.Floor = s.Ceiling, s.Floor
	}
	p.PauseUntil = later(p.PauseUntil, s.PauseUntil)
}

// pacing returns the length of a pacing slice: Config.Pacing, or the pacing
// learnt from the downstream; 0 for none.
func (q *quota) pacing() time.Duration {
	if q.cfg.unpaced {
		return 0
	}
	if q.cfg.pacing > 0 || !q.cfg.adaptive {
		return q.cfg.pacing
	}
	return q.trial.pace
}

// slices is the number of pacing slices in an epoch, or 1 without pacing.
func (q *quota) slices() int64 {
	pace := q.pacing()
	if pace <= 0 {
		return 1
	}
	return (epochNanos + int64(pace) - 1) / int64(pace)
}

// sliceAt returns the pacing slice of st's epoch that store-clock ns falls in.
func (q *quota) sliceAt(st *epochState, ns int64) int {
	pace := q.pacing()
	if pace <= 0 {
		return 0
	}
	into := ns - st.epoch*epochNanos
	return int(min(max(into/int64(pace), 0), q.slices()-1))
}

// allowance is how many of share tokens may be granted by the end of slice k.
func (q *quota) allowance(share int64, k int) int64 {
	n := q.slices()
	if int64(k) >= n-1 {
		return share
	}
	return mulDiv(share, int64(k)+1, n)
}
