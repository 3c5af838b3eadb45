package vertex

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/forward"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// buildSource opens the vertex's source.
func (v *Vertex) buildSource() (isb.Reader, error) {
	r, err := v.spec.Source(v.env())
	if err == nil && r == nil {
		err = fmt.Errorf("vertex %s: its source function returned no source", v.spec.Name)
	}
	return r, err
}

// retryAfter tells turned-away HTTP clients when tokens come: at the next epoch.
func (v *Vertex) retryAfter() time.Duration {
	if v.limiter == nil {
		return time.Second
	}
	next := time.Unix(v.limiter.Status().Epoch+1, 0)
	return next.Sub(v.o.clock.Now())
}

// buildFunctions sets the transformer and the UDF of one forwarder. Each
// forwarder has its own: a user-defined function's client carries one batch at
// a time.
func (v *Vertex) buildFunctions(d *forward.Deps) (err error) {
	if f := v.spec.Transformer; f != nil {
		if d.Transformer, err = f(v.env()); err != nil {
			return err
		}
	}
	if f := v.spec.Map; f != nil {
		if d.Mapper, err = f(v.env()); err != nil {
			return err
		}
	}
	return nil
}

// buildWriters sets the sink and fallback sink of one forwarder: the
// vertex's sinks, or the writer along its edges.
func (v *Vertex) buildWriters(d *forward.Deps) (err error) {
	if s := v.spec.Sink; s != nil {
		if d.Sink, err = s(v.env()); err != nil {
			return err
		}
		d.Bypass = v.spec.Bypass
		if fb := v.spec.Fallback; fb != nil {
			if d.Fallback, err = fb(v.env()); err != nil {
				return err
			}
		}
		if ons := v.spec.OnSuccess; ons != nil {
			d.OnSuccess, err = ons(v.env())
		}
		return err
	}
	w, err := v.spec.Output()
	if err != nil {
		return err
	}
	if w == nil {
		return errors.New("vertex " + v.spec.Name + ": no writer along its edges")
	}
	d.Sink = w
	return nil
}

// excludeDropped reports whether the tokens of dropped messages go back.
func (v *Vertex) excludeDropped() bool {
	rl := v.spec.Limits.RateLimit
	return v.limiter != nil && rl.ExcludeDropped
}

// accepted returns what the forwarders do with the number of messages the
// sink wrote: with an adaptive rate limit, give it to the limiter, which
// learns from it the rate a refusing downstream takes; without, nil.
func (v *Vertex) accepted() func(n int) {
	rl := v.spec.Limits.RateLimit
	if v.limiter == nil || rl == nil || !rl.Config.Adaptive {
		return nil
	}
	return v.limiter.Accepted
}

// signal returns what the forwarders do with a throttle signal: with an
// adaptive rate limit, give the kinds it lists to the limiter, which cuts the
// pool and pauses for the Retry-After; without, nil.
func (v *Vertex) signal() func(kind isb.SignalKind, retryAfter time.Duration) {
	rl := v.spec.Limits.RateLimit
	if v.limiter == nil || rl == nil || !rl.Config.Adaptive {
		return nil
	}
	kinds := rl.Signals
	if kinds == nil {
		kinds = isb.Signals
	}
	return func(kind isb.SignalKind, retryAfter time.Duration) {
		switch {
		case !slices.Contains(kinds, kind):
		case kind == isb.SignalHTTP503:
			v.limiter.SignalUnavailable(retryAfter)
		default:
			v.limiter.Signal(retryAfter)
		}
	}
}
