package ratelimit

import (
	"slices"
	"time"

	"go.uber.org/zap"
)

// What the downstream accepted. With Config.Adaptive, the caller that writes
// to the downstream tells the limiter how many of its messages it accepted
// ([Limiter.Accepted]); the replica counts them per epoch, and at the end
// of an epoch in which one of its own signals came, without a store:
//
//   - unpaced, the cut planned for the signal learns what the downstream
//     accepted in the epoch, A: the ceiling is A+1 tokens, the rate known
//     to pass A, and the cut is to A at most (to A at once for a probe's
//     signal). So a fixed window's quota is learnt exactly, however far
//     above it the pool was;
//   - at the replica's first such signal, unless Config.Pacing is set, it
//     tries pacing ([AdaptivePacing]): the signal cuts nothing and teaches
//     no ceiling, and from the next epoch the replica sends the refused
//     pool again, spread over the second, and no more until the trial is
//     judged. When a whole epoch at that pool
//     or above passes (and the downstream accepted something in it, not a
//     replica that sent nothing), the downstream is a token bucket whose burst is
//     below its rate, and the replica keeps pacing: what it accepted of
//     the refused burst, less what the bucket gained until the refusal,
//     is the bucket's burst. When the downstream refuses paced too (a
//     fixed window), or after pacingTrialEpochs epochs, the replica goes
//     back to granting each epoch's share at its start, and the signal
//     that ended the trial teaches the quota as above;
//   - paced, the downstream is taken for a token bucket, full at the
//     epoch after the pause that followed the replica's previous signal
//     and empty at the new one (a drain): its rate is the one that
//     drained it, each epoch gaining the rate and losing what was
//     accepted in it, up to the burst, until the refusal, which came
//     when the signal did. The ceiling is that rate, and the cut goes to
//     the hold below it at once. A drain with fewer than two epochs in
//     which the downstream accepted something tells too little: the
//     signal's own cut stands. Two drains whose lengths differ by two
//     epochs or more tell the burst as well (the longer weighs it less;
//     it must be below the rate), which a bucket found with Config.Pacing
//     set learns so, and which corrects a burst that was refused when the
//     bucket was not full. A drain no rate explains with the burst known
//     forgets the burst. Before any
//     burst is known the ceiling is one above the average accepted over
//     the epochs since the previous signal (up to lagWindow of them, the
//     last lagMin when fewer), and for a probe's signal at least half-way
//     between the hold and the rate that passed the epoch before.
//
// With a store the cut and its ceiling are decided when the signal comes,
// for every replica, from the pool.

// AdaptivePacing is the pacing a replica tries, and keeps, with
// Config.Adaptive and no Config.Pacing, when a downstream refused a burst it
// takes spread over the second.
const AdaptivePacing = 100 * time.Millisecond

// Accepted tells the limiter that the downstream accepted n messages now.
// With Config.Adaptive off it does nothing. It is one atomic add, and safe
// for concurrent use.
func (l *Limiter) Accepted(n int) {
	if !l.cfg.Adaptive || n <= 0 {
		return
	}
	if st := l.state.Load(); st != nil {
		st.accepted.Add(int64(n))
	}
	if !l.accepting.Load() { // written once: the workers share its cache line
		l.accepting.Store(true)
	}
}

// pacing returns the length of a pacing slice: Config.Pacing, or the pacing
// learnt from the downstream; 0 for none. l.mu is held.
func (l *Limiter) pacing() time.Duration {
	if l.unpaced {
		return 0
	}
	if l.cfg.Pacing > 0 || !l.cfg.Adaptive {
		return l.cfg.Pacing
	}
	return l.signals.trial.pace
}

// acceptedEnded looks at what the downstream accepted in cur, which is
// ending: it tries pacing, and makes the cut planned for one of the
// replica's own signals in cur learn the rate accepted. l.mu is held.
func (l *Limiter) acceptedEnded(cur *epochState) {
	if !l.cfg.Adaptive || !l.accepting.Load() || !cur.eligible {
		return
	}
	a := cur.accepted.Load()
	l.tryPacing(cur, a)
	// Without a store, paced, the probes above the hold climb by less and
	// back off while refused (ceiling.go); with one, the ceiling is the
	// pool's, the same on every replica.
	l.ramp.paced = l.link.store == nil && l.pacing() > 0 && !l.signals.trial.in
	l.ramp.bucket = 0
	if l.ramp.paced {
		l.ramp.bucket = l.signals.bucket.burst * milli
	}
	r := &l.signals.recent
	copy(r[1:], r[:len(r)-1])
	r[0] = a
	clean := l.signals.clean
	switch {
	case l.signals.taught == cur.epoch:
		l.signals.clean = -1 // the epoch after a signal is paused: it does not count
	case l.signals.taught == cur.epoch-1:
		l.signals.clean = 0
	default:
		l.signals.clean = min(l.signals.clean+1, lagWindow-1)
	}
	p := &l.signals.planned
	if l.signals.taught != cur.epoch || l.link.store != nil || !p.ok || p.epoch != cur.epoch || a <= 0 {
		return
	}
	if t := &l.signals.trial; t.in && t.from == cur.epoch {
		// The trial sends the refused pool again, paced: no cut, and no
		// ceiling until it is judged.
		p.ceiling, p.floor, p.pool = 0, 0, max(l.ramp.min, min(cur.pool, l.ramp.max))
		l.ramp.trial = p.pool
		return
	}
	if l.pacing() > 0 && !l.signals.trial.in {
		// A drain longer than the epochs kept began with the bucket
		// perhaps not full: it tells the rate, a little low, and not the
		// burst.
		d := drain{run: slices.Clone(r[1 : 1+max(clean, 0)]), a: a, at: l.refusedAt(cur)}
		if l.learnBucket(p, d, clean < lagWindow-1) {
			return
		}
	}
	if l.pacing() > 0 && (a*milli < p.floor || p.probe) {
		// A downstream that lags, or a probe refused paced (its refusal
		// may come late in the epoch, after more than the rate passed):
		// the rate is what it took over the last epochs, not what it took
		// in this one, nor what passed before.
		// Over the epochs since its last refusal, a reserve it held is
		// spread thin; with fewer than lagMin of them, the last lagMin
		// epochs count.
		w := r[:lagMin]
		if clean >= lagMin {
			w = r[1 : 1+clean]
		}
		// A refused probe climbed from a hold that passed to a pool that
		// passed the epoch before (p.floor), on a reserve or not: the rate
		// is at least half-way between them.
		avg := sum(w) / int64(len(w))
		if c := l.ramp.ceil; c.known && p.probe {
			avg = max(avg, (l.ramp.holdOf(c)+p.floor)/2/milli)
		}
		if avg > 0 && (avg+1)*milli < p.ceiling {
			p.ceiling, p.floor, p.pool = (avg+1)*milli, 0, max(l.ramp.min, min(p.pool, avg*milli))
		}
		return
	}
	if (a+1)*milli > p.ceiling {
		return
	}
	p.ceiling, p.floor = (a+1)*milli, a*milli
	p.pool = min(p.pool, p.floor)
	if p.probe {
		p.pool = p.floor
	}
	p.pool = max(l.ramp.min, min(p.pool, l.ramp.max))
}

// learnBucket makes the cut p planned for a signal, paced, learn the rate
// of a token bucket downstream from d, the drain that ended with it, whole
// when it began with the bucket full: the rate is the one that drained it;
// two whole drains of unlike lengths tell its burst too, when no burst
// refused unpaced told it. It reports false when no burst is known, and
// the rate is to be learnt otherwise.
func (l *Limiter) learnBucket(p *cutPlan, d drain, whole bool) bool {
	prev := l.signals.drained
	l.signals.drained = drain{}
	if whole {
		// The burst is below the rate (it is why pacing was kept).
		if b, ok := burstOf(prev, d, l.ramp.max); ok && b*milli <= d.rate(bucketSeen{burst: b}, l.ramp.max) {
			l.signals.bucket = bucketSeen{burst: b}
		}
		l.signals.drained = d
	}
	if l.signals.bucket.burst <= 0 {
		return false
	}
	if d.sent() < 2 {
		// Too short a drain to tell the rate: the signal's own cut stands
		// (to the pool that passed before it).
		return true
	}
	fields := []zap.Field{zap.Int64s("acceptedSinceRefused", d.run), zap.Int64("acceptedInRefused", d.a),
		zap.Float64("refusedAt", d.at), zap.Int64("burst", l.signals.bucket.burst)}
	rate := d.rate(l.signals.bucket, l.ramp.max)
	if rate <= 0 {
		// No rate explains the drain with the burst known: the burst is
		// not known after all, and the signal's own cut stands.
		l.log.Debug("a drain no token bucket of the burst known explains", fields...)
		l.signals.bucket, l.signals.drained = bucketSeen{}, drain{}
		return true
	}
	// A short drain tells the rate less exactly: the ceiling is the rate
	// less what a slice's timing and a token or two of the burst can make
	// of it over the drain's length.
	c := max(milli, rate-d.uncertainty(rate))
	l.log.Debug("learnt the rate of a token bucket downstream",
		append(fields, zap.Float64("rate", float64(rate)/milli), zap.Float64("ceiling", float64(c)/milli))...)
	hold := max(l.ramp.min, min(l.ramp.holdOf(ceiling{pool: c}), l.ramp.max))
	p.ceiling, p.floor, p.pool = c, hold, hold
	return true
}

// drain is what a paced replica saw of a token bucket downstream from a
// refusal to the next: what it accepted in each epoch between them, the
// last first (the bucket full at the start), and in the epoch of the
// second, a, which came at at of the way through it (the bucket empty).
type drain struct {
	run []int64
	a   int64
	at  float64
}

// bucketSeen is what a paced replica knows of a token bucket downstream: its
// burst, tokens (0 for none known), told by what it accepted of a burst
// refused at at of the way through its epoch, less what it gained since
// the epoch began; or, with at 0, by two drains.
type bucketSeen struct {
	burst int64
	at    float64
}

// size returns the bucket's burst if its rate is rate, tokens a second.
func (b bucketSeen) size(rate float64) float64 { return float64(b.burst) - rate*b.at }

// left returns how many tokens bucket b would hold at the refusal if its
// rate were rate (tokens a second): negative when it would have refused
// before. Each epoch the bucket gains the rate and loses what it accepted,
// and holds no more than its burst.
func (d drain) left(rate float64, b bucketSeen) float64 {
	size := b.size(rate)
	n := size
	for i := len(d.run) - 1; i >= 0; i-- {
		n = min(size, n+rate-float64(d.run[i]))
	}
	return n + rate*d.at - float64(d.a)
}

// rate returns the rate (milli-tokens a second) of bucket b that the drain
// emptied; 0 when none up to most explains it.
func (d drain) rate(b bucketSeen, most int64) int64 {
	if b.burst <= 0 || d.a <= 0 {
		return 0
	}
	lo, hi := 0.0, float64(most)/milli
	if d.left(hi, b) < 0 {
		return 0
	}
	for range 40 {
		if mid := (lo + hi) / 2; d.left(mid, b) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int64(hi * milli)
}

// sent returns how many epochs of the drain before its refusal the
// downstream accepted something in.
func (d drain) sent() int {
	n := 0
	for _, a := range d.run {
		if a > 0 {
			n++
		}
	}
	return n
}

// uncertainty returns how far from rate (milli-tokens a second) the rate
// the drain tells may be: 1% of it and 2 tokens, over the drain's length in
// seconds.
func (d drain) uncertainty(rate int64) int64 {
	return int64(float64(rate/100+2*milli) / (float64(len(d.run)) + max(d.at, 0.5)))
}

// burstOf returns the burst (tokens) of the bucket that both drains
// emptied at one rate, and whether there is one: their lengths must differ
// by two epochs or more, since a longer drain weighs the burst less.
func burstOf(d1, d2 drain, most int64) (int64, bool) {
	if d1.a <= 0 || d2.a <= 0 {
		return 0, false
	}
	short, long := d1, d2
	if len(short.run) > len(long.run) {
		short, long = long, short
	}
	if len(long.run)-len(short.run) < 2 {
		return 0, false
	}
	// The longer drain's rate less the shorter's grows with the burst.
	gap := func(b int64) int64 {
		return long.rate(bucketSeen{burst: b}, most) - short.rate(bucketSeen{burst: b}, most)
	}
	lo, hi := int64(1), max(1, most/milli)
	if gap(lo) >= 0 || gap(hi) <= 0 {
		return 0, false
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; gap(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, true
}

// lagWindow is the most epochs whose acceptances a paced replica averages
// to learn the rate of a downstream that lags, and lagMin the fewest.
const (
	lagWindow = 16
	lagMin    = 4
)

// pacingTrial is the replica's one trial of pacing, at the first of its own
// signals that teach a ceiling: paced from the next epoch on, it keeps
// pacing when, by epoch until, an epoch with a pool above the signal's
// (base, milli-tokens) passed without a signal: the downstream takes
// spread over the second a rate it refused in a burst.
type pacingTrial struct {
	pace        time.Duration // the pacing in force; 0 for none
	base        int64
	burst       int64   // what the downstream accepted in the refused epoch, tokens
	at          float64 // how far through it the refusal came
	from, until int64   // the epoch of the signal, and the last of the trial
	started, in bool
}

// pacingTrialEpochs is how many epochs a trial of pacing lasts: long enough
// for the pool to climb back and probe above the ceiling its signal taught.
const pacingTrialEpochs = 10

// tryPacing begins the trial of pacing at the replica's first signal, and
// judges it by cur, which is ending and in which the downstream accepted
// a. l.mu is held.
func (l *Limiter) tryPacing(cur *epochState, a int64) {
	t := &l.signals.trial
	switch {
	case l.cfg.Pacing > 0 || l.unpaced:
	case t.in && l.signals.taught == cur.epoch && cur.epoch > t.from:
		// Refused paced as in a burst: a quota per second.
		t.in, t.pace, l.ramp.trial = false, 0, 0
	case t.in && l.signals.last < cur.epoch && !cur.heldAny && cur.pool >= t.base && a > 0:
		t.in, l.ramp.trial = false, 0
		l.signals.bucket = bucketSeen{burst: t.burst, at: t.at}
		l.log.Info("pacing the pool: the downstream takes spread over the second a rate it refused in a burst",
			zap.Float64("refusedInABurst", float64(t.base)/milli), zap.Float64("takenPaced", float64(cur.pool)/milli),
			zap.Int64("acceptedInTheBurst", t.burst), zap.Duration("pacing", t.pace))
	case t.in && cur.epoch >= t.until:
		t.in, t.pace, l.ramp.trial = false, 0, 0
	case !t.started && l.signals.taught == cur.epoch && !l.ramp.probing(cur.epoch):
		*t = pacingTrial{pace: AdaptivePacing, base: cur.pool, burst: a, at: l.refusedAt(cur), from: cur.epoch,
			until: cur.epoch + pacingTrialEpochs, started: true, in: true}
	}
}

// refusedAt returns how far through cur, which is ending, the downstream
// refused what the replica sent, as a fraction of it: when the first of its
// own signals in it came if the pause it asked for covers the rest of the
// epoch, else 1 (the replica went on sending, and the downstream went on
// taking what it could). l.mu is held.
func (l *Limiter) refusedAt(cur *epochState) float64 {
	if l.signals.pauseUntil >= (cur.epoch+1)*epochNanos {
		return float64(l.signals.at) / float64(epochNanos)
	}
	return 1
}

func sum(s []int64) int64 {
	n := int64(0)
	for _, v := range s {
		n += v
	}
	return n
}
