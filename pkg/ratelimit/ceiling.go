package ratelimit

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
//   - from epoch F+ProbeAfter on it probes: H plus (4^j - 1)/3 times G in
//     the j-th epoch of probing (G, 5G, 21G, 85G...), so by little at first
//     and then by more, so that a quota that rose is found again within a
//     few epochs;
//   - from epoch F+ForgetAfter on the ceiling is forgotten, and the mode
//     ramps up to Max.
//
// A signal that comes while the pool is capped cuts it again and teaches a
// lower ceiling; one that comes while probing, a ceiling just above the
// quota. A signal that the resource is unavailable (SignalUnavailable, an
// HTTP 503) teaches none: the cut climbs back towards the ceiling known.
// The cap only ever lowers what the mode would give, never below the cut,
// so the pool stays in [Min, Max].

// ceiling is what the last cut taught the ramp.
type ceiling struct {
	known  bool
	pool   int64 // C, milli-tokens
	cut    int64 // the cut's pool, milli-tokens
	passed int64 // B, milli-tokens; 0 for none
	from   int64 // F, the cut's first epoch
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
	r.ceil = ceiling{known: true, pool: c, cut: min(p, c), passed: min(f, c), from: e}
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
	// The hold is a whole number of tokens below the ceiling's: a ceiling
	// of 151.5 was refused at 151 tokens, and holds at 150.
	gap := max(1, c.pool/milli*r.holdPct/100) * milli
	hold := max(c.cut, c.pool/milli*milli-gap)
	if k < r.probeAfter {
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
		return hold - left, true
	}
	j := k - r.probeAfter + 1
	if j >= 30 {
		return 0, false
	}
	probe := mulDiv(gap, (1<<(2*j)-1)/3, 1)
	if probe >= r.max {
		return 0, false
	}
	return hold + probe, true
}

// capped returns p under the cap of epoch e, if any.
func (r *ramp) capped(p, e int64) int64 {
	if c, ok := r.capAt(e); ok {
		return min(p, c)
	}
	return p
}
