package forward

import (
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/route"
)

// Bypass is a MonoVertex's bypass (spec.bypass): conditions on a message's
// tags that send it straight to the sink, the fallback sink or the on-success
// sink, checked in that order after the source (and its transformer) and
// again after the map; the first one a message meets takes it, past the
// functions after that point. A nil condition takes nothing. As in Numaflow,
// when Sink is set the messages no condition takes are not written to the
// sink but dropped (counted in the drop metric); what Fallback and OnSuccess
// take goes to those sinks, and counts in their metrics.
type Bypass struct {
	Sink, Fallback, OnSuccess *route.Condition
}

// bypass takes out of msgs the messages a condition of the forwarder's Bypass
// takes, adding them to f.bySink, f.byFallback or f.byOnSuccess, and returns
// the rest, compacted in place.
func (f *worker) bypass(msgs []isb.Message) []isb.Message {
	b := f.d.Bypass
	if b == nil {
		return msgs
	}
	rest := msgs[:0]
	for _, m := range msgs {
		switch {
		case b.Sink != nil && b.Sink.Match(m.Tags):
			f.bySink = append(f.bySink, m)
		case b.Fallback != nil && b.Fallback.Match(m.Tags):
			f.byFallback = append(f.byFallback, m)
		case b.OnSuccess != nil && b.OnSuccess.Match(m.Tags):
			f.byOnSuccess = append(f.byOnSuccess, m)
		default:
			rest = append(rest, m)
		}
	}
	return rest
}
