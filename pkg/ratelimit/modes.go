package ratelimit

import (
	"math"
	"math/bits"
	"time"
)

// milli is the number of milli-tokens in a token. The pool and the slope are kept in
// integer milli-tokens so that floors and comparisons are exact.
const milli = 1000

// ramp is the pool's ramp policy (see Mode), as pure integer arithmetic. It is not
// safe for concurrent use; the Limiter calls it with its mutex held.
type ramp struct {
	mode        Mode
	min, max    int64 // milli-tokens
	slope       int64 // milli-tokens per epoch
	initial     int64 // P of the first epoch with a call, milli-tokens
	threshold   int64 // percent
	coolDown    int64 // whole idle epochs tolerated before GoBackN ramps down
	rampDownPct int64 // percent of a slope per idle epoch
	start       int64 // the limiter's first epoch (Scheduled counts from it)

	// Scheduled after a cut: from epoch cutEpoch on, P is at most cutPool plus
	// one slope per epoch since.
	hasCut   bool
	cutEpoch int64
	cutPool  int64

	// The last epoch with a call (L) and what it saw.
	hasLast   bool
	last      int64
	lastPool  int64
	lastUsed  int64
	lastShare int64
}

func newRamp(c Config, start int64) ramp {
	r := ramp{
		mode:        c.Mode,
		min:         c.Min * milli,
		max:         c.Max * milli,
		threshold:   int64(c.ThresholdPercentage),
		coolDown:    int64(c.CoolDownPeriod / time.Second),
		rampDownPct: int64(c.RampDownPercentage),
		start:       start,
	}
	r.slope = slopeOf(c.Max-c.Min, c.RampUpDuration)
	r.initial = r.min
	if c.RampUpDuration == 0 {
		r.initial = r.max
	}
	return r
}

// slopeOf returns round_half_up(delta*1000 / rampUp[s]) milli-tokens per epoch, or
// delta*1000 when rampUp is 0 (the pool starts at max).
func slopeOf(delta int64, rampUp time.Duration) int64 {
	if rampUp <= 0 {
		return delta * milli
	}
	// (delta * 1000 * 1e9 * 2 + rampNanos) / (2 * rampNanos), in 128 bits.
	hi, lo := bits.Mul64(uint64(delta), 2*milli*uint64(time.Second))
	lo, carry := bits.Add64(lo, uint64(rampUp), 0)
	hi += carry
	d := 2 * uint64(rampUp)
	if hi >= d {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, d)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// mulDiv returns floor(a*b/c) for non-negative a, b and positive c, saturating at
// math.MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func (r *ramp) clamp(p int64) int64 { return max(r.min, min(r.max, p)) }

// up returns p plus one slope, saturating at max.
func (r *ramp) up(p int64) int64 {
	if r.slope >= r.max-p {
		return r.max
	}
	return p + r.slope
}

// poolAt returns P for epoch e as the mode says, assuming e is the epoch after
// every recorded one, and whether the learnt ceiling may cap it (not the
// pool a first call sees, of a mode other than Scheduled); [quota.poolAt]
// caps and clamps it. For every mode but Scheduled it is the pool a call in e
// sees.
func (r *ramp) poolAt(e int64) (p int64, capped bool) {
	if r.mode == Scheduled {
		p := r.initial
		if r.initial != r.max && e > r.start {
			p = r.clamp(r.min + min(r.max, mulDiv(r.slope, e-r.start, 1)))
		}
		if r.hasCut {
			p = min(p, r.cutPool+min(r.max, mulDiv(r.slope, max(e-r.cutEpoch, 0), 1)))
		}
		return p, true
	}
	if !r.hasLast {
		return r.initial, false
	}
	p = r.lastPool
	idle := e - r.last - 1
	used := r.lastUsed*100 >= r.threshold*r.lastShare
	switch r.mode {
	case Relaxed:
		p = r.up(p)
	case OnlyIfUsed:
		if used {
			p = r.up(p)
		}
	case GoBackN:
		switch {
		case idle > r.coolDown:
			p -= min(p, mulDiv(r.slope, mulDiv(r.rampDownPct, idle, 1), 100))
		case used:
			p = r.up(p)
		default:
			p -= min(p, r.slope)
		}
	}
	return p, true
}

// resume starts the ramp from pool p (milli-tokens, clamped to [min, max]) at
// epoch e, when no epoch has been recorded yet: Scheduled by moving its start back
// as many slopes as p is above min, the other modes by starting from p.
func (r *ramp) resume(p, e int64) {
	if r.hasLast {
		return
	}
	p = r.clamp(p)
	if r.mode == Scheduled {
		if r.slope > 0 && r.initial != r.max {
			r.start = e - (p-r.min)/r.slope
		}
		return
	}
	r.initial = p
}

// cut makes p (milli-tokens, clamped to [min, max]) the pool of epoch e, the
// first epoch after a cut, and of every epoch until the next one with a
// call; the ramp goes on from it as the mode says. Scheduled climbs back
// from p one slope per epoch, never above its schedule.
func (r *ramp) cut(p, e int64) {
	p = r.clamp(p)
	if r.mode == Scheduled {
		r.hasCut, r.cutEpoch, r.cutPool = true, e, p
		return
	}
	r.hasLast, r.initial = false, p
}

// hold notes that epoch e, with pool p, was paused from start to end: the
// pool stands still over it. Only Scheduled needs telling; the other modes
// move with the epochs they record, and a paused epoch is not recorded.
func (r *ramp) hold(e, p int64) {
	if r.mode == Scheduled {
		r.hasCut, r.cutEpoch, r.cutPool = true, e+1, p
	}
}

// record notes that epoch e saw a call, with pool P, and that at its end used of
// share tokens had been taken.
func (r *ramp) record(e, pool, used, share int64) {
	r.hasLast, r.last, r.lastPool, r.lastUsed, r.lastShare = true, e, pool, used, share
}

// shareOf returns replica rank's share of the pool P (milli-tokens) split among n
// replicas: floor(floor(P)/n), plus one for the first floor(P) mod n ranks. The
// shares of ranks 0..n-1 sum to exactly floor(P).
func shareOf(pool int64, n, rank int) int64 {
	if n <= 0 || rank < 0 || rank >= n {
		return 0
	}
	tokens := pool / milli
	s := tokens / int64(n)
	if int64(rank) < tokens%int64(n) {
		s++
	}
	return s
}
