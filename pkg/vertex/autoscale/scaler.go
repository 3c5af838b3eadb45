package autoscale

import (
	"math"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Limit is one rate limit a vertex's messages pass, with its own pool: the
// vertex's own (Name ""), or a shared group's or region's it joins.
type Limit struct {
	// Name is "" for the vertex's own limit, else the group's or region's.
	Name string
	// Pool is the tokens a second the pool holds now: the ramp's pool,
	// after any cut, not Max.
	Pool float64
	// Max is the limit's max, which the pool ramps up to; a limit whose
	// Max is 0 is not known yet and caps nothing.
	Max float64
}

// Observation is what a vertex's replicas report at one time, summed over
// them: what [Scaler.Decide] decides from.
type Observation struct {
	// Replicas is the replicas running now.
	Replicas int
	// Pending is the messages waiting to be processed.
	Pending int64
	// Rate is the messages processed a second by all the replicas.
	Rate float64
	// Limits are the rate limits the messages pass; none for a vertex
	// without a rate limit.
	Limits []Limit
	// Throttled reports that the replicas ran out of tokens: the pool, not
	// their own speed, held them back.
	Throttled bool
	// Paused reports that a throttle signal's pause holds the vertex.
	Paused bool
	// Cut reports that the closed loop cut the pool since the last
	// observation.
	Cut bool
}

// Decision is the rule's answer for one [Observation].
type Decision struct {
	// Replicas is the count the vertex should have.
	Replicas int
	// Wanted is what the backlog asks for, before the limit, the bounds
	// and the cool-downs.
	Wanted int
	// Fits is the replicas the pools keep busy now, with the headroom of
	// a ramp; 0 when the rule knows of no cap.
	Fits int
	// Ramping reports that the pool that sets Fits is ramping up.
	Ramping bool
	// ReplicaRate is the rate of one replica the rule used: the config's,
	// or learnt; 0 while unknown.
	ReplicaRate float64
	// Reason says why Replicas is what it is.
	Reason Reason
}

// sample is one observation within the lookback.
type sample struct {
	at      time.Time
	pending int64
	rate    float64
}

// Scaler is the one scaling rule of a vertex: from the backlog (what is
// pending and how fast it drains) and the rate of a replica, the replicas
// that drain it within the target processing time, capped at the replicas
// the rate limit's current pool keeps busy (one more while the pool ramps
// up), within [Config.Min, Config.Max], a few replicas at a time and not
// within a cool-down of the last change. A vertex paused by a throttle
// signal does not scale up, and one whose pool the closed loop cut holds
// its count for a lookback; a vertex with no replica starts from Min.
//
// The Scaler keeps the observations of its lookback, the rate of a replica
// it learnt and the time of its last change: one Scaler per vertex, asked
// once per interval. Create one with [New]; the zero value is not usable.
// It is safe for concurrent use.
type Scaler struct {
	mu  sync.Mutex
	cfg Config
	clk clock.Clock

	samples    []sample
	lastScaled time.Time // zero: never
	lastCut    time.Time // zero: never
	learnt     float64
	pools      map[string]float64 // each limit's pool at the last observation
}

// Option configures a [Scaler].
type Option func(*Scaler)

// WithClock makes the Scaler read time from c (a manual clock in tests and
// in simulations); the real clock by default.
func WithClock(c clock.Clock) Option { return func(s *Scaler) { s.clk = c } }

// New returns a Scaler for cfg, or cfg's [*RangeError].
func New(cfg Config, opts ...Option) (*Scaler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scaler{cfg: cfg, clk: clock.Real(), pools: map[string]float64{}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Config returns the Scaler's config.
func (s *Scaler) Config() Config { return s.cfg }

// Decide records o, taken now, and returns the count the vertex should
// have. The steps, in order:
//
//  1. Disabled: the count stays.
//  2. No replica: Min, at least one when something is pending.
//  3. Outside [Min, Max]: the nearest bound, at once.
//  4. Wanted: ceil((arrivals + pending/TargetProcessing) / replica rate),
//     where arrivals are the rate processed plus the growth of pending,
//     each averaged over the lookback; 0 when nothing is pending or
//     processed; the count when nothing is processed and the rate of a
//     replica is not known.
//  5. Capped at Fits: for each limit, ceil(pool / replica rate), plus one
//     while that pool ramps up; with the rate not known yet, the count
//     while the replicas are throttled.
//  6. A cut within the lookback holds the count; a pause does not scale up.
//  7. Within [Min, Max], at most ReplicasPerScaleUp (Down) at once, and
//     not before ScaleUpCooldown (ScaleDownCooldown) after the last change.
//
// The rate of a replica is Config.ReplicaRate, or, when 0, the rate per
// replica of the last observation in which the replicas were busy (something
// still pending) and not throttled.
func (s *Scaler) Decide(o Observation) Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	ramping := s.observe(now, o)
	cur, cfg := max(o.Replicas, 0), s.cfg
	d := Decision{Replicas: cur, ReplicaRate: s.replicaRate()}
	if cfg.Disabled {
		d.Reason = Disabled
		return d
	}
	pending, rate, growth := s.averages()
	d.Wanted = s.wanted(cur, pending, rate, growth, d.ReplicaRate)
	d.Fits, d.Ramping = s.fits(o, ramping, d.ReplicaRate)
	switch {
	case cur == 0:
		n := cfg.Min
		if o.Pending > 0 {
			n = max(n, 1)
		}
		return s.set(now, d, min(n, cfg.Max), FromZero)
	case cur < cfg.Min || cur > cfg.Max:
		return s.set(now, d, max(cfg.Min, min(cur, cfg.Max)), Bounds)
	case cfg.Min == cfg.Max:
		return d
	}
	target, reason := d.Wanted, Backlog
	if d.Fits > 0 && target > d.Fits {
		target, reason = d.Fits, AtLimit
		if d.Ramping {
			reason = Ramping
		}
	}
	switch {
	case !s.lastCut.IsZero() && now.Sub(s.lastCut) < cfg.Lookback:
		target, reason = cur, Cut
	case o.Paused && target > cur:
		target, reason = cur, Paused
	}
	if t := max(cfg.Min, min(target, cfg.Max)); t != target {
		target, reason = t, Bounds
	}
	if target == cur {
		if reason == Backlog {
			reason = Steady
		}
		d.Reason = reason
		return d
	}
	since, ever := now.Sub(s.lastScaled), !s.lastScaled.IsZero()
	if target > cur {
		if ever && since < cfg.ScaleUpCooldown {
			d.Reason = CoolDown
			return d
		}
		return s.set(now, d, min(target, cur+cfg.ReplicasPerScaleUp), reason)
	}
	if ever && since < cfg.ScaleDownCooldown {
		d.Reason = CoolDown
		return d
	}
	return s.set(now, d, max(target, cur-cfg.ReplicasPerScaleDown), reason)
}

// set makes n the decision's count for reason, and notes a change.
func (s *Scaler) set(now time.Time, d Decision, n int, reason Reason) Decision {
	if n != d.Replicas {
		s.lastScaled = now
	} else if reason == FromZero || reason == Bounds {
		reason = Steady
	}
	d.Replicas, d.Reason = n, reason
	return d
}

// observe records o: its sample, a cut, the rate of a replica when the
// replicas are busy and not throttled, and each limit's pool. It returns
// the names of the limits whose pool rose and is below their max.
func (s *Scaler) observe(now time.Time, o Observation) map[string]bool {
	s.samples = append(s.samples, sample{at: now, pending: max(o.Pending, 0), rate: finite(o.Rate)})
	drop := 0
	for drop < len(s.samples)-1 && now.Sub(s.samples[drop].at) >= s.cfg.Lookback {
		drop++
	}
	s.samples = s.samples[drop:]
	if o.Cut {
		s.lastCut = now
	}
	if o.Pending > 0 && !o.Throttled && !o.Paused && o.Replicas > 0 && finite(o.Rate) > 0 {
		s.learnt = o.Rate / float64(o.Replicas)
	}
	ramping := map[string]bool{}
	seen := map[string]bool{}
	for _, l := range o.Limits {
		if prev, ok := s.pools[l.Name]; ok && l.Pool > prev && l.Pool < l.Max {
			ramping[l.Name] = true
		}
		s.pools[l.Name], seen[l.Name] = l.Pool, true
	}
	for name := range s.pools {
		if !seen[name] {
			delete(s.pools, name)
		}
	}
	return ramping
}

// averages returns pending and the processing rate averaged over the
// lookback, and the growth of pending a second over it.
func (s *Scaler) averages() (pending, rate, growth float64) {
	for _, x := range s.samples {
		pending += float64(x.pending)
		rate += x.rate
	}
	n := float64(len(s.samples))
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	if span := last.at.Sub(first.at).Seconds(); span > 0 {
		growth = float64(last.pending-first.pending) / span
	}
	return pending / n, rate / n, growth
}

// replicaRate is the rate of one replica: the config's, or learnt.
func (s *Scaler) replicaRate() float64 {
	if s.cfg.ReplicaRate > 0 {
		return s.cfg.ReplicaRate
	}
	return s.learnt
}

// wanted is what the backlog asks for (step 4 of Decide).
func (s *Scaler) wanted(cur int, pending, rate, growth, perReplica float64) int {
	arrivals := max(rate+growth, 0)
	need := arrivals + pending/s.cfg.TargetProcessing.Seconds()
	switch {
	case pending == 0 && rate == 0:
		return 0
	case perReplica == 0 && rate == 0:
		return cur
	case perReplica == 0:
		perReplica = rate / float64(max(cur, 1))
	}
	return max(ceilReplicas(need/perReplica), 1)
}

// fits is the replicas the pools keep busy (step 5 of Decide), and whether
// the pool that sets it ramps.
func (s *Scaler) fits(o Observation, ramping map[string]bool, perReplica float64) (int, bool) {
	best, ramp := 0, false
	for _, l := range o.Limits {
		if !(l.Max > 0) {
			continue // a limit not known yet caps nothing
		}
		var n int
		switch {
		case perReplica > 0:
			n = max(ceilReplicas(finite(l.Pool)/perReplica), 1)
			if ramping[l.Name] {
				n++
			}
		case o.Throttled:
			n = max(o.Replicas, 1)
		default:
			continue
		}
		if best == 0 || n < best {
			best, ramp = n, ramping[l.Name] && perReplica > 0
		}
	}
	return best, ramp
}

// ceilReplicas rounds a count of replicas up, forgiving the float error
// of a count that is whole, and saturates far above any cluster.
func ceilReplicas(x float64) int {
	if !(x < maxReplicas) {
		return maxReplicas
	}
	return int(math.Ceil(x - 1e-9))
}

// finite is v, or 0 when v is negative, NaN or infinite: a rate or pool
// that cannot be read counts as none.
func finite(v float64) float64 {
	if !(v >= 0) || math.IsInf(v, 1) {
		return 0
	}
	return v
}
