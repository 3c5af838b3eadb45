package vertex

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// DesiredInterval is how often a vertex with a scale rule (Spec.Scale)
// observes itself and sets sluice_desired_replicas.
const DesiredInterval = time.Second

// desired is the scaling rule a replica runs on what it knows of its
// vertex, and the gauge of its answer.
type desired struct {
	sc    *autoscale.Scaler
	gauge prometheus.Gauge

	mu        sync.Mutex
	at        time.Time // of the last observation; zero before the first
	read      float64   // messages read by then
	throttled float64   // seconds throttled by the limit by then
	cuts      int64     // cuts of the pool by then
	last      autoscale.Decision
	answered  time.Time // of the observation last answered
}

// buildDesired registers sluice_desired_replicas for a vertex with a scale
// rule, at 0 until the first observation.
func (v *Vertex) buildDesired(reg prometheus.Registerer) error {
	if v.spec.Scale == nil {
		return nil
	}
	sc, err := autoscale.New(*v.spec.Scale, autoscale.WithClock(v.o.clock))
	if err != nil {
		return err
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_desired_replicas",
		Help: "Replicas the vertex's scale rule wants, from this replica's pending count, processing rate, pools and the replica count of its rate limit's store; take the max over replicas."})
	reg.MustRegister(g)
	v.desired = &desired{sc: sc, gauge: g}
	return nil
}

// Desired returns the scale rule's last answer for the vertex and the time
// of the observation it answered; the zero time for a vertex without a rule
// (Spec.Scale) or before its first answer.
func (v *Vertex) Desired() (autoscale.Decision, time.Time) {
	d := v.desired
	if d == nil {
		return autoscale.Decision{}, time.Time{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last, d.answered
}

// runDesired observes the vertex every DesiredInterval until ctx is done.
func (v *Vertex) runDesired(ctx context.Context) {
	for {
		v.observeDesired()
		if !sleep(ctx, v.o.clock, DesiredInterval) {
			return
		}
	}
}

// observeDesired gives the rule what the replica knows now and sets the
// gauge to its answer. The first call only notes the counters.
func (v *Vertex) observeDesired() {
	d := v.desired
	d.mu.Lock()
	defer d.mu.Unlock()
	now := v.o.clock.Now()
	read, _ := v.moved()
	throttled := v.tracker.Seconds(ratelimit.ReasonRateLimited)
	o, cuts := v.observation(now)
	first, span := d.at.IsZero(), now.Sub(d.at).Seconds()
	prevRead, prevThrottled, prevCuts := d.read, d.throttled, d.cuts
	d.at, d.read, d.throttled, d.cuts = now, read, throttled, cuts
	if first || span <= 0 {
		return
	}
	// The replica knows its own rate; the others share the same pool.
	o.Rate = (read - prevRead) / span * float64(o.Replicas)
	o.Throttled = o.Throttled || throttled > prevThrottled
	o.Cut = cuts > prevCuts
	d.last, d.answered = d.sc.Decide(o), now
	d.gauge.Set(float64(d.last.Replicas))
}

// observation is what the replica knows of its vertex at now, but its rate:
// the replicas of its rate limit's store (1 without a rate limit), the
// pending count of its source (0 while unknown; the group's for Kafka; the
// replica's part times the replicas for core NATS), each
// limit's pool, and whether it is throttled or paused now; and the cuts of
// its pool so far.
func (v *Vertex) observation(now time.Time) (autoscale.Observation, int64) {
	o := autoscale.Observation{Replicas: 1}
	var cuts int64
	whole, known := v.sourcePending()
	if known {
		o.Pending = whole
	} else if v.pendingGauge != nil {
		o.Pending = max(v.lastPending.Load(), 0)
	}
	_, reasons := v.tracker.Throttled()
	for _, r := range reasons {
		switch r {
		case ratelimit.ReasonRateLimited:
			o.Throttled = true
		case ratelimit.ReasonDownstreamThrottled:
			o.Paused = true
		}
	}
	if l := v.limiter; l != nil {
		ls := l.Status()
		if ls.Replicas > 0 {
			o.Replicas = ls.Replicas
		}
		o.Limits = append(o.Limits, autoscale.Limit{Pool: ls.Pool(), Max: float64(ls.Max)})
		o.Paused = o.Paused || ls.PausedUntil.After(now)
		cuts = ls.Cuts
		for _, g := range v.groups {
			gs := g.l.Status()
			o.Limits = append(o.Limits, autoscale.Limit{Name: g.name, Pool: gs.Pool(), Max: float64(gs.Max)})
		}
	}
	if v.pendingOwn && !known {
		o.Pending *= int64(o.Replicas)
	}
	return o, cuts
}
