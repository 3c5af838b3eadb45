package ratelimit

import "math"

// The learnt ceiling. A throttle signal says the downstream refused the
// rate the vertex sent at: the pool P of the epoch it came in. A cut keeps
// that pool as the ceiling C, and from the cut's epoch F on the ramp's
// climb is capped, the same way in every replica (C and F come from the
// store):
//
//   - the hold H is the whole tokens of C less max(1, HoldBelowPercentage
//     of them) tokens: the gap G;
//   - in epoch F+k the cap is H - (H-B)/2^k when a lower rate B is known to
//     have passed (the pool of the epoch before the signal's, when no signal
//     came in it: a bisection between what passed and what was refused),
//     else H - (H-cut)/8^k: the pool climbs at the mode's slope while far
//     below the ceiling, and ever more slowly near it, until it holds at H;
//   - once the pool has been at H an epoch, and from epoch F+ProbeAfter, it
//     probes: H plus (4^j - 1)/3 times G in the j-th epoch of probing (G,
//     5G, 21G, 85G...), so by little at first and then by more; from the
//     hold a probe climbs faster than the mode's slope if it must. Paced
//     without a store (Config.Pacing, or the pacing kept after its
//     trial), a token bucket's reserve hides an overshoot: with the
//     bucket's burst Z known (accepted.go) the probe is one more gap
//     above the hold after each Z/(jG) epochs at j gaps, the time an
//     overshoot of jG takes to drain a full bucket; without, it probes by
//     G, 3G, 6G, 10G..., and each probe refused in a row doubles the wait
//     for the next, ProbeAfter times 2^n from the cut, at most half of
//     ForgetAfter. Otherwise, when the ceiling replaced a higher one whose
//     hold passed (a quota that dropped), the second probe tries that hold
//     at once, so that a quota that returns is found again within a few
//     epochs;
//   - from epoch F+ForgetAfter on the ceiling is forgotten, and the mode
//     ramps up to Max.
//
// A signal that comes while the pool is capped, at a pool above the one
// that passed the epoch before (climbing or probing), falls back to that
// pool (Limiter.cutTo) and teaches the refused one as the ceiling; one at
// the pool that passed (a quota that dropped) cuts it by CutPercentage. A signal that the resource is unavailable (SignalUnavailable,
// an HTTP 503) teaches none: the cut climbs back towards the ceiling known.
// What the downstream accepted refines a replica's own cut (accepted.go).
// The cap only ever lowers what the mode would give, never below the cut,
// but for a probe from the hold, and never above Max, so the pool stays in
// [Min, Max].

// ceiling is what the last cut taught the ramp.
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
func (r *ramp) learn(c, f, p, e int64) {
	if c <= 0 && r.ceil.known && e-r.ceil.from < r.forgetAfter {
		c, f = r.ceil.pool, r.ceil.passed
	}
	if c <= 0 || r.forgetAfter <= 0 {
		r.ceil = ceiling{}
		return
	}
	above := int64(0)
	if old := r.ceil; old.known && e-old.from < r.forgetAfter {
		// The old hold counts when it passed: it is the rate known to pass,
		// or the pool held at it an epoch before the signal. The rate
		// above it counts until a probe has tried it.
		if hold := r.holdOf(old); old.passed >= hold || (old.held > 0 && old.held < e-1) {
			above = hold
		}
		if cp, ok := r.capAt(e - 1); old.above > 0 && !(ok && r.probing(e-1) && cp >= old.above) {
			above = max(above, old.above)
		}
	}
	back := int64(0)
	if old := r.ceil; old.known && r.paced && r.probing(e-1) {
		// Paced, a refused probe doubles the wait for the next one.
		back = min(old.backoff+1, 8)
	}
	r.ceil = ceiling{known: true, pool: c, cut: min(p, c), passed: min(f, c), from: e, backoff: back}
	if above > r.holdOf(r.ceil) {
		r.ceil.above = above
	}
}

// gapOf returns the gap G of ceiling c: max(1, HoldBelowPercentage of its
// whole tokens) tokens, in milli-tokens.
func (r *ramp) gapOf(c ceiling) int64 { return max(1, c.pool/milli*r.holdPct/100) * milli }

// holdOf returns the hold H of ceiling c: a whole number of tokens below
// the ceiling's, never below the cut. A ceiling of 151.5 was refused at
// 151 tokens, and holds at 150.
func (r *ramp) holdOf(c ceiling) int64 { return max(c.cut, c.pool/milli*milli-r.gapOf(c)) }

// climbAt returns the cap of the climb from the cut to the hold in the
// k-th epoch after the cut (k >= 1), and whether it has reached the hold.
func (r *ramp) climbAt(k int64) (int64, bool) {
	c := r.ceil
	hold := r.holdOf(c)
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
func (r *ramp) probeFrom() int64 {
	if r.ceil.held == 0 {
		return math.MaxInt64
	}
	after := r.probeAfter
	if b := r.ceil.backoff; b > 0 {
		after = max(after, min(r.probeAfter<<b, r.forgetAfter/2))
	}
	return max(after, r.ceil.held-r.ceil.from+1)
}

// recordHeld notes that epoch e had pool p: the first at the hold starts
// the wait for probing.
func (r *ramp) recordHeld(e, p int64) {
	if r.ceil.known && r.ceil.held == 0 && e >= r.ceil.from && p >= r.holdOf(r.ceil) {
		r.ceil.held = e
	}
}

// capAt returns the cap the learnt ceiling puts on the pool of epoch e, and
// whether there is one.
func (r *ramp) capAt(e int64) (int64, bool) {
	c := r.ceil
	k := e - c.from
	if !c.known || k >= r.forgetAfter {
		return 0, false
	}
	if k <= 0 {
		return c.cut, true
	}
	from := r.probeFrom()
	if k < from {
		cp, _ := r.climbAt(k)
		return cp, true
	}
	hold, gap := r.holdOf(c), r.gapOf(c)
	j := k - from + 1
	if j >= 30 && !r.paced {
		return 0, false
	}
	probe := mulDiv(gap, r.probeSteps(j), 1)
	if j >= 2 && c.above > hold && !r.paced {
		// The second probe tries the rate a dropped quota had; the next
		// ones probe above it as from a hold. Paced, a rate that passed on
		// a reserve is no quota: the probes climb from the hold.
		i := j - 2
		probe = max(c.above-hold+mulDiv(gap, r.probeSteps(i), 1), probe)
		if i > 0 {
			probe = c.above - hold + mulDiv(gap, r.probeSteps(i), 1)
		}
	}
	if probe >= r.max {
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
func (r *ramp) probeSteps(j int64) int64 {
	if r.paced && r.bucket > 0 {
		// A token bucket of a known burst: each gap more lasts as long as
		// the overshoot takes to drain a full bucket.
		g := r.gapOf(r.ceil)
		level := int64(1)
		for rem := j; ; level++ {
			d := max(1, (r.bucket+level*g-1)/(level*g))
			if rem <= d {
				return level
			}
			rem -= d
		}
	}
	if r.paced {
		return j * (j + 1) / 2
	}
	return (1<<(2*j) - 1) / 3
}

// probing reports whether the cap of epoch e is a probe above the hold.
func (r *ramp) probing(e int64) bool {
	k := e - r.ceil.from
	return r.ceil.known && k > 0 && k < r.forgetAfter && k >= r.probeFrom()
}

// capped returns p under the cap of epoch e, if any.
func (r *ramp) capped(p, e int64) int64 {
	if c, ok := r.capAt(e); ok {
		p = min(p, c)
	}
	if r.trial > 0 {
		p = min(p, max(r.trial, r.min))
	}
	return p
}
