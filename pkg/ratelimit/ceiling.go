package ratelimit

import "math"

// ceiling is what the last cut taught: the pool P of the epoch in which
// the downstream refused the rate the vertex sent (the ceiling C), and
// from the cut's epoch F on, the cap on the ramp's climb, the same in every
// replica (C and F come from the store):
//
//   - the hold H is the whole tokens of C less max(1, HoldBelowPercentage
//     of them) tokens: the gap G (holdOf, gapOf);
//   - in epoch F+k the cap is H - (H-B)/2^k when a lower rate B is known to
//     have passed (the pool of the epoch before the signal's, when no signal
//     came in it: a bisection between what passed and what was refused),
//     else H - (H-cut)/8^k: the pool climbs at the mode's slope while far
//     below the ceiling, and ever more slowly near it, until it holds at H
//     (climbAt);
//   - once the pool has been at H an epoch, and from epoch F+ProbeAfter, it
//     probes: H plus (4^j - 1)/3 times G in the j-th epoch of probing (G,
//     5G, 21G, 85G...); from the hold a probe climbs faster than the mode's
//     slope if it must (probeFrom, probeSteps). Paced without a store, a
//     token bucket's reserve hides an overshoot: with the bucket's burst Z
//     known the probe is one more gap above the hold after each Z/(jG)
//     epochs at j gaps; without, it probes by G, 3G, 6G, 10G..., and each
//     probe refused in a row doubles the wait for the next, ProbeAfter
//     times 2^n from the cut, at most half of ForgetAfter. Otherwise, when
//     the ceiling replaced a higher one whose hold passed (a quota that
//     dropped), the second probe tries that hold at once, so that a quota
//     that returns is found again within a few epochs;
//   - from epoch F+ForgetAfter on the ceiling is forgotten, and the mode
//     ramps up to Max.
//
// A signal that teaches no ceiling (SignalUnavailable) climbs back towards
// the one known (learn). The cap only ever lowers what the mode would
// give, never below the cut, but for a probe from the hold, and never above
// Max, so the pool stays in [Min, Max].
type ceiling struct {
	known  bool
	pool   int64 // C, milli-tokens
	cut    int64 // the cut's pool, milli-tokens
	passed int64 // B, milli-tokens; 0 for none
	from   int64 // F, the cut's first epoch
	// above is the highest hold of the ceilings that lower ones replaced
	// since, milli-tokens; 0 for none: the rate a quota that dropped had,
	// which the second probe tries at once.
	above int64
	// held is the first epoch whose pool was at the hold, 0 before: the
	// pool probes from the epoch after it, and ProbeAfter from the cut.
	held int64
	// backoff is how many probes in a row were refused paced: the next
	// probe waits ProbeAfter times 2^backoff from the cut, at most half of
	// ForgetAfter.
	backoff int64
}

// learn keeps ceiling c and the rate f that passed below it (milli-tokens;
// 0 for none) of a cut to pool p from epoch e. A cut without a ceiling (of
// a signal that teaches none) keeps the ceiling known, if it is not yet
// forgotten, and climbs back towards it from p.
func (q *quota) learn(c, f, p, e int64) {
	if c <= 0 && q.ceil.known && e-q.ceil.from < q.cfg.forgetAfter {
		c, f = q.ceil.pool, q.ceil.passed
	}
	if c <= 0 || q.cfg.forgetAfter <= 0 {
		q.ceil = ceiling{}
		return
	}
	above := int64(0)
	if old := q.ceil; old.known && e-old.from < q.cfg.forgetAfter {
		// The old hold counts when it passed: it is the rate known to pass,
		// or the pool held at it an epoch before the signal. The rate
		// above it counts until a probe has tried it.
		if hold := q.holdOf(old); old.passed >= hold || (old.held > 0 && old.held < e-1) {
			above = hold
		}
		if cp, ok := q.capAt(e - 1); old.above > 0 && !(ok && q.probing(e-1) && cp >= old.above) {
			above = max(above, old.above)
		}
	}
	back := int64(0)
	if old := q.ceil; old.known && q.paced && q.probing(e-1) {
		// Paced, a refused probe doubles the wait for the next one.
		back = min(old.backoff+1, 8)
	}
	q.ceil = ceiling{known: true, pool: c, cut: min(p, c), passed: min(f, c), from: e, backoff: back}
	if above > q.holdOf(q.ceil) {
		q.ceil.above = above
	}
}

// gapOf returns the gap G of ceiling c: max(1, HoldBelowPercentage of its
// whole tokens) tokens, in milli-tokens.
func (q *quota) gapOf(c ceiling) int64 { return max(1, c.pool/milli*q.cfg.holdPct/100) * milli }

// holdOf returns the hold H of ceiling c: a whole number of tokens below
// the ceiling's, never below the cut. A ceiling of 151.5 was refused at
// 151 tokens, and holds at 150.
func (q *quota) holdOf(c ceiling) int64 { return max(c.cut, c.pool/milli*milli-q.gapOf(c)) }

// climbAt returns the cap of the climb from the cut to the hold in the
// k-th epoch after the cut (k >= 1), and whether it has reached the hold.
func (q *quota) climbAt(k int64) (int64, bool) {
	c := q.ceil
	hold := q.holdOf(c)
	base, shift := c.cut, 3*k
	if c.passed > 0 {
		base, shift = min(max(c.passed, c.cut), hold), k
	}
	left := int64(0)
	if shift < 63 {
		left = (hold - base) >> shift
	}
	if left < milli {
		return hold, true
	}
	return hold - left, false
}

// probeFrom returns the first epoch of probing, counted from the cut: at
// least ProbeAfter, and after the pool has been at the hold an epoch.
func (q *quota) probeFrom() int64 {
	if q.ceil.held == 0 {
		return math.MaxInt64
	}
	after := q.cfg.probeAfter
	if b := q.ceil.backoff; b > 0 {
		after = max(after, min(q.cfg.probeAfter<<b, q.cfg.forgetAfter/2))
	}
	return max(after, q.ceil.held-q.ceil.from+1)
}

// recordHeld notes that epoch e had pool p: the first at the hold starts
// the wait for probing.
func (q *quota) recordHeld(e, p int64) {
	if q.ceil.known && q.ceil.held == 0 && e >= q.ceil.from && p >= q.holdOf(q.ceil) {
		q.ceil.held = e
	}
}

// capAt returns the cap the learnt ceiling puts on the pool of epoch e, and
// whether there is one.
func (q *quota) capAt(e int64) (int64, bool) {
	c := q.ceil
	k := e - c.from
	if !c.known || k >= q.cfg.forgetAfter {
		return 0, false
	}
	if k <= 0 {
		return c.cut, true
	}
	from := q.probeFrom()
	if k < from {
		cp, _ := q.climbAt(k)
		return cp, true
	}
	hold, gap := q.holdOf(c), q.gapOf(c)
	j := k - from + 1
	if j >= 30 && !q.paced {
		return 0, false
	}
	probe := mulDiv(gap, q.probeSteps(j), 1)
	if j >= 2 && c.above > hold && !q.paced {
		// The second probe tries the rate a dropped quota had; the next
		// ones probe above it as from a hold. Paced, a rate that passed on
		// a reserve is no quota: the probes climb from the hold.
		i := j - 2
		probe = max(c.above-hold+mulDiv(gap, q.probeSteps(i), 1), probe)
		if i > 0 {
			probe = c.above - hold + mulDiv(gap, q.probeSteps(i), 1)
		}
	}
	if probe >= q.cfg.max {
		return 0, false
	}
	return hold + probe, true
}

// probeSteps returns how many gaps above the hold the j-th epoch of
// probing is: (4^j - 1)/3; paced, j(j+1)/2 (a downstream that takes a rate
// spread over the second may hold a reserve that hides an overshoot for
// seconds: the pool climbs above the hold by one more gap each epoch, so
// that the overshoot it finds is small), or, with the burst of the token
// bucket known, one more gap each time a full bucket would have drained.
func (q *quota) probeSteps(j int64) int64 {
	if q.paced && q.bucket > 0 {
		// A token bucket of a known burst: each gap more lasts as long as
		// the overshoot takes to drain a full bucket.
		g := q.gapOf(q.ceil)
		level := int64(1)
		for rem := j; ; level++ {
			d := max(1, (q.bucket+level*g-1)/(level*g))
			if rem <= d {
				return level
			}
			rem -= d
		}
	}
	if q.paced {
		return j * (j + 1) / 2
	}
	return (1<<(2*j) - 1) / 3
}

// probing reports whether the cap of epoch e is a probe above the hold.
func (q *quota) probing(e int64) bool {
	k := e - q.ceil.from
	return q.ceil.known && k > 0 && k < q.cfg.forgetAfter && k >= q.probeFrom()
}

// capped returns p under the cap of epoch e, if any.
func (q *quota) capped(p, e int64) int64 {
	if c, ok := q.capAt(e); ok {
		p = min(p, c)
	}
	if q.trialPool > 0 {
		p = min(p, max(q.trialPool, q.cfg.min))
	}
	return p
}
