package ratelimit

import (
	"slices"
	"time"

	"go.uber.org/zap"
)

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
	if !l.quota.accepting.Load() { // written once: the workers share its cache line
		l.quota.accepting.Store(true)
	}
}

// acceptance is what a replica saw the downstream accept over the last
// epochs.
type acceptance struct {
	recent  [lagWindow]int64 // what the downstream accepted in the last epochs, the last first
	clean   int              // epochs before the last that followed a signal of this replica's own by two or more
	bucket  bucketSeen       // the token bucket found downstream
	drained drain            // the last drain of that bucket
}

// push records that the downstream accepted a in epoch e, ending, and
// returns the clean epochs before it. taught is the epoch of the replica's
// last own signal that teaches a ceiling.
func (s *acceptance) push(a, e, taught int64) (clean int) {
	r := &s.recent
	copy(r[1:], r[:len(r)-1])
	r[0] = a
	clean = s.clean
	switch {
	case taught == e:
		s.clean = -1 // the epoch after a signal is paused: it does not count
	case taught == e-1:
		s.clean = 0
	default:
		s.clean = min(s.clean+1, lagWindow-1)
	}
	return clean
}

// ended looks at what the downstream accepted ([Limiter.Accepted]) in cur,
// which is ending, when the caller that writes to it says so: it tries
// pacing (tryPacing), follows the pacing in force, and, without a store,
// makes the cut planned for one of the replica's own signals in cur learn
// the rate accepted in it, A (learnAccepted). With a store the cut and its
// ceiling are decided when the signal comes, for every replica, from the
// pool.
func (q *quota) ended(cur *epochState) {
	if !q.cfg.adaptive || !q.accepting.Load() || !cur.eligible {
		return
	}
	a := cur.accepted.Load()
	q.tryPacing(cur, a)
	// Without a store, paced, the probes above the hold climb by less and
	// back off while refused (ceiling.go); with one, the ceiling is the
	// pool's, the same on every replica.
	q.paced = !q.cfg.shared && q.pacing() > 0 && !q.trial.in
	q.bucket = 0
	if q.paced {
		q.bucket = q.seen.bucket.burst * milli
	}
	clean := q.seen.push(a, cur.epoch, q.signals.taught)
	p := &q.signals.planned
	if q.signals.taught != cur.epoch || q.cfg.shared || !p.ok || p.epoch != cur.epoch || a <= 0 {
		return
	}
	q.learnAccepted(p, cur, a, clean)
}

// learnAccepted makes p, the cut planned for the replica's own signal in
// cur, learn from a, what the downstream accepted in cur, by the first rule
// that applies:
//
//   - in the first epoch of a trial of pacing, the signal cuts nothing and
//     teaches no ceiling: the trial sends the refused pool again, paced;
//   - paced, a token bucket whose burst is known: its rate (learnBucket);
//   - paced, a downstream that lags, or a probe refused: the rate it took
//     over the last epochs (learnLag);
//   - else a fixed window: the ceiling is A+1 tokens, the rate known to
//     pass A, and the cut is to A at most (learnWindow). So a fixed window's
//     quota is learnt exactly, however far above it the pool was.
func (q *quota) learnAccepted(p *cutPlan, cur *epochState, a int64, clean int) {
	switch r := &q.seen.recent; {
	case q.trial.in && q.trial.from == cur.epoch:
		p.ceiling, p.floor, p.pool = 0, 0, max(q.cfg.min, min(cur.pool, q.cfg.max))
		q.trialPool = p.pool
	case q.pacing() > 0 && !q.trial.in &&
		// A drain longer than the epochs kept began with the bucket
		// perhaps not full: it tells the rate, a little low, and not the
		// burst.
		q.learnBucket(p, drain{run: slices.Clone(r[1 : 1+max(clean, 0)]), a: a, at: q.refusedAt(cur)}, clean < lagWindow-1):
	case q.pacing() > 0 && (a*milli < p.floor || p.probe):
		q.learnLag(p, clean)
	default:
		q.learnWindow(p, a)
	}
}

// learnLag makes p learn the rate of a downstream that lags, or of a probe
// refused paced (its refusal may come late in the epoch, after more than
// the rate passed): what it took over the epochs since its last refusal,
// over which a reserve it held is spread thin (the last lagMin when
// fewer), not what it took in this one, nor what passed before. A refused
// probe climbed from a hold that passed to a pool that passed the epoch
// before (p.floor), on a reserve or not: the rate is at least half-way
// between them. The ceiling is one above that rate.
func (q *quota) learnLag(p *cutPlan, clean int) {
	r := &q.seen.recent
	w := r[:lagMin]
	if clean >= lagMin {
		w = r[1 : 1+clean]
	}
	avg := sum(w) / int64(len(w))
	if c := q.ceil; c.known && p.probe {
		avg = max(avg, (q.holdOf(c)+p.floor)/2/milli)
	}
	if avg > 0 && (avg+1)*milli < p.ceiling {
		p.ceiling, p.floor, p.pool = (avg+1)*milli, 0, max(q.cfg.min, min(p.pool, avg*milli))
	}
}

// learnWindow makes p learn a fixed window's quota from a, what the
// downstream accepted in the signal's epoch: the ceiling is a+1 tokens, the
// rate known to pass a, and the cut is to a at most (to a at once for a
// probe's signal). A ceiling already at or below a+1 stays.
func (q *quota) learnWindow(p *cutPlan, a int64) {
	if (a+1)*milli > p.ceiling {
		return
	}
	p.ceiling, p.floor = (a+1)*milli, a*milli
	p.pool = min(p.pool, p.floor)
	if p.probe {
		p.pool = p.floor
	}
	p.pool = max(q.cfg.min, min(p.pool, q.cfg.max))
}

// learnBucket makes the cut p planned for a signal, paced, learn the rate
// of a token bucket downstream from d, the drain that ended with it. The
// bucket is taken to be full at the epoch after the pause that followed
// the replica's previous signal and empty at the new one: its rate is the
// one that drained it, each epoch gaining the rate and losing what was
// accepted in it, up to the burst, until the refusal, which came when the
// signal did; the ceiling is that rate, and the cut goes to the hold below
// it at once. Two whole drains (begun with the bucket full) whose lengths
// differ by two epochs or more tell the burst as well, which corrects a
// burst told by the pacing trial. A drain with fewer than two epochs in
// which the downstream accepted something tells too little, and one no
// rate explains with the burst known forgets the burst: the signal's own
// cut stands. It reports false when no burst is known, and the rate is to
// be learnt otherwise.
func (q *quota) learnBucket(p *cutPlan, d drain, whole bool) bool {
	seen := &q.seen
	prev := seen.drained
	seen.drained = drain{}
	if whole {
		// The burst is below the rate (it is why pacing was kept).
		if b, ok := burstOf(prev, d, q.cfg.max); ok && b*milli <= d.rate(bucketSeen{burst: b}, q.cfg.max) {
			seen.bucket = bucketSeen{burst: b}
		}
		seen.drained = d
	}
	if seen.bucket.burst <= 0 {
		return false
	}
	if d.sent() < 2 {
		return true
	}
	fields := []zap.Field{zap.Int64s("acceptedSinceRefused", d.run), zap.Int64("acceptedInRefused", d.a),
		zap.Float64("refusedAt", d.at), zap.Int64("burst", seen.bucket.burst)}
	rate := d.rate(seen.bucket, q.cfg.max)
	if rate <= 0 {
		q.log.Debug("a drain no token bucket of the burst known explains", fields...)
		seen.bucket, seen.drained = bucketSeen{}, drain{}
		return true
	}
	// A short drain tells the rate less exactly: the ceiling is the rate
	// less what a slice's timing and a token or two of the burst can make
	// of it over the drain's length.
	c := max(milli, rate-d.uncertainty(rate))
	q.log.Debug("learnt the rate of a token bucket downstream",
		append(fields, zap.Float64("rate", float64(rate)/milli), zap.Float64("ceiling", float64(c)/milli))...)
	hold := max(q.cfg.min, min(q.holdOf(ceiling{pool: c}), q.cfg.max))
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
// signals that teach a ceiling, unless Config.Pacing is set: the signal
// cuts nothing and teaches no ceiling, and from the next epoch the replica
// sends the refused pool (base, milli-tokens) again, paced by
// [AdaptivePacing], and no more until the trial is judged (tryPacing).
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
// a. When a whole epoch at the refused pool or above passes (and the
// downstream accepted something in it, not a replica that sent nothing),
// the downstream is a token bucket whose burst is below its rate, and the
// replica keeps pacing: what it accepted of the refused burst, less what
// the bucket gained until the refusal, is the bucket's burst. When the
// downstream refuses paced too (a fixed window), or after
// pacingTrialEpochs epochs, the replica goes back to granting each
// epoch's share at its start, and the signal that ended the trial teaches
// the quota (learnAccepted).
func (q *quota) tryPacing(cur *epochState, a int64) {
	t := &q.trial
	switch {
	case q.cfg.pacing > 0 || q.cfg.unpaced:
	case t.in && q.signals.taught == cur.epoch && cur.epoch > t.from:
		// Refused paced as in a burst: a quota per second.
		t.in, t.pace, q.trialPool = false, 0, 0
	case t.in && q.signals.last < cur.epoch && !cur.heldAny && cur.pool >= t.base && a > 0:
		t.in, q.trialPool = false, 0
		q.seen.bucket = bucketSeen{burst: t.burst, at: t.at}
		q.log.Info("pacing the pool: the downstream takes spread over the second a rate it refused in a burst",
			zap.Float64("refusedInABurst", float64(t.base)/milli), zap.Float64("takenPaced", float64(cur.pool)/milli),
			zap.Int64("acceptedInTheBurst", t.burst), zap.Duration("pacing", t.pace))
	case t.in && cur.epoch >= t.until:
		t.in, t.pace, q.trialPool = false, 0, 0
	case !t.started && q.signals.taught == cur.epoch && !q.probing(cur.epoch):
		*t = pacingTrial{pace: AdaptivePacing, base: cur.pool, burst: a, at: q.refusedAt(cur), from: cur.epoch,
			until: cur.epoch + pacingTrialEpochs, started: true, in: true}
	}
}

// refusedAt returns how far through cur, which is ending, the downstream
// refused what the replica sent, as a fraction of it: when the first of its
// own signals in it came if the pause it asked for covers the rest of the
// epoch, else 1 (the replica went on sending, and the downstream went on
// taking what it could).
func (q *quota) refusedAt(cur *epochState) float64 {
	if q.signals.pauseUntil >= (cur.epoch+1)*epochNanos {
		return float64(q.signals.at) / float64(epochNanos)
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
