package vertex

import (
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// throttle returns what throttles a forwarder of the vertex, from its rate
// limit: the message limiter's gate, the byte limiter's, the cost of a
// message, a gate of each group joined, the per-key limit, and where the
// throttle signals and what the sink accepted go. shared says other
// forwarders share the limiters: each then takes a lane of its own.
func (v *Vertex) throttle(shared bool) *throttle.Throttle {
	t := &throttle.Throttle{Limiter: throttle.Noop{}, Signal: v.signal(), Accepted: v.accepted(), PerKey: v.perKey()}
	if l := v.limiter; l != nil {
		// The gate enforces the limit but in the epochs in which
		// rateLimit.shadow is on, which a live change can turn on and off.
		t.Limiter = l.Gate()
		if shared {
			t.Limiter = l.Lane().Gate()
		}
	}
	if l := v.bytes; l != nil {
		t.Bytes = l.Gate()
		if shared {
			t.Bytes = l.Lane().Gate()
		}
	}
	if rl := v.spec.Limits.RateLimit; rl != nil && rl.Cost != nil && v.limiter != nil {
		t.Cost = rl.Cost
	}
	for _, g := range v.groups {
		gate := g.l.Gate()
		if shared {
			gate = g.l.Lane().Gate()
		}
		t.Groups = append(t.Groups, gate)
	}
	return t
}
