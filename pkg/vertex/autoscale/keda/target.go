package keda

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// target is one vertex the scaler serves: its rule, its replicas'
// addresses and what the last read of them found.
type target struct {
	name  string
	addrs []string
	rule  *autoscale.Scaler

	mu       sync.Mutex
	err      error // the last read's error, nil when it succeeded
	decision autoscale.Decision
	obs      autoscale.Observation
	active   bool
	changed  chan struct{}      // closed and replaced when active or err change
	prev     map[string]float64 // readTotal by replica address, last read
	prevAt   time.Time
	pools    map[string]autoscale.Limit // by limit name, last read
}

func newTarget(name string, addrs []string, rule *autoscale.Scaler) *target {
	return &target{name: name, addrs: addrs, rule: rule, changed: make(chan struct{}),
		decision: autoscale.Decision{Replicas: rule.Config().Min}}
}

// poll reads the replicas and decides, once.
func (t *target) poll(ctx context.Context, r *reader, now time.Time) (autoscale.Decision, autoscale.Observation, error) {
	reports, err := r.read(ctx, t.addrs)
	t.mu.Lock()
	defer t.mu.Unlock()
	wasActive, wasErr := t.active, t.err != nil
	if err != nil {
		t.err = err
		if !wasErr {
			t.notify()
		}
		return t.decision, t.obs, err
	}
	t.err = nil
	t.obs = t.observe(reports, now)
	t.decision = t.rule.Decide(t.obs)
	t.active = t.obs.Pending > 0 || t.obs.Rate > 0
	if t.active != wasActive || wasErr {
		t.notify()
	}
	return t.decision, t.obs, nil
}

func (t *target) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// observe sums the replicas' reports into an observation: the rate from
// the growth of each replica's readTotal since the last read, the pools
// from their limits, a pool that fell while its max held as a cut.
func (t *target) observe(reports []report, now time.Time) autoscale.Observation {
	o := autoscale.Observation{Replicas: len(reports)}
	totals := map[string]float64{}
	var read float64
	pending := -1.0
	limits := map[string]*autoscale.Limit{}
	limit := func(name string, pool float64, max int64) {
		l := limits[name]
		if l == nil {
			l = &autoscale.Limit{Name: name}
			limits[name] = l
		}
		l.Pool, l.Max = math.Max(l.Pool, pool), math.Max(l.Max, float64(max))
	}
	for _, rep := range reports {
		s := rep.status
		totals[rep.addr] = s.ReadTotal
		if p, ok := t.prev[rep.addr]; ok && s.ReadTotal >= p {
			read += s.ReadTotal - p
		}
		// Every replica of a source tells the source's pending count (a
		// shared consumer's, a group's lag), not a part of it.
		pending = math.Max(pending, rep.pending)
		if s.RateLimit {
			limit("", s.Pool, s.Max)
		}
		for _, g := range s.Groups {
			limit(g.Name, g.Pool, g.Max)
		}
		for _, why := range s.Reasons {
			switch why {
			case "rate_limited", "awaiting_agreement":
				o.Throttled = true
			case "downstream_throttled":
				o.Paused = true
			}
		}
	}
	if pending > 0 {
		o.Pending = int64(pending)
	}
	if el := now.Sub(t.prevAt).Seconds(); !t.prevAt.IsZero() && el > 0 {
		o.Rate = read / el
	}
	pools := map[string]autoscale.Limit{}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		l := limits[name]
		o.Limits = append(o.Limits, *l)
		pools[name] = *l
		if p, ok := t.pools[name]; ok && l.Pool < p.Pool && l.Max == p.Max {
			o.Cut = true
		}
	}
	t.prev, t.prevAt, t.pools = totals, now, pools
	return o
}

// snapshot is what the RPCs answer from: the last decision, the last
// read's error, whether the vertex is active, and a channel closed at the
// next change of either of the last two.
type snapshot struct {
	decision autoscale.Decision
	err      error
	active   bool
	changed  <-chan struct{}
}

func (t *target) state() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return snapshot{decision: t.decision, err: t.err, active: t.active, changed: t.changed}
}
