package simulate

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// Scaled is a simulated vertex whose replicas the scaling rule sets: its
// rate limit, the rule's config, the messages one replica processes a
// second, and what arrives.
type Scaled struct {
	// Limit is the vertex's rate limit.
	Limit ratelimit.Config
	// Scale is the rule's config. Its ReplicaRate is what the rule is
	// told of a replica's rate; 0 lets it learn the rate.
	Scale autoscale.Config
	// ReplicaRate is the messages one simulated replica processes a second.
	ReplicaRate int
	// Demand is the messages that arrive in each epoch (NoCall: none).
	Demand []int
	// Signals[i], when not [NoSignal], is a throttle signal after epoch i's
	// processing, as in [Scenario]; it needs Limit.Adaptive.
	Signals []time.Duration
}

// ScaledEpoch is one epoch of a [SimulateScaled] run.
type ScaledEpoch struct {
	// Epoch counts from 1.
	Epoch int
	// Demand is what arrived, PoolMilli the pool in milli-tokens, Processed
	// what the replicas processed (the processing rate) and Backlog what
	// was pending at the epoch's end.
	Demand    int
	PoolMilli int64
	Processed int
	Backlog   int64
	// Replicas is the replicas that ran in the epoch, and Fits the
	// replicas the pool keeps busy: ceil(pool / ReplicaRate).
	Replicas, Fits int
	// Throttled reports that the replicas could process more than the
	// pool let through; Paused and Cut are the closed loop's.
	Throttled, Paused, Cut bool
	// Decision is the rule's answer at the epoch's end: the replicas of
	// the next epoch.
	Decision autoscale.Decision
}

// SimulateScaled runs the real rate limiter and the real scaling rule on
// one manual clock, one epoch a second. In each epoch the demand joins the
// backlog, the replicas take tokens for what they can process of it
// (Replicas × ReplicaRate, at most the backlog) in one call, process what
// they were granted, and the rule is given what they did; its answer is
// the replica count of the next epoch, which starts at Scale.Min. A
// replica starts at once: the rule's cool-downs stand in for a pod's start.
func SimulateScaled(s Scaled) ([]ScaledEpoch, error) {
	if s.ReplicaRate < 1 {
		return nil, fmt.Errorf("simulate: the replica rate (%d) must be at least 1", s.ReplicaRate)
	}
	cfg := s.Limit
	cfg.Pacing = 0
	clk := clock.NewManual(simStart)
	l, err := ratelimit.New(cfg, ratelimit.WithClock(clk), ratelimit.WithoutPacing())
	if err != nil {
		return nil, err
	}
	defer l.Close(context.Background())
	sc, err := autoscale.New(s.Scale, autoscale.WithClock(clk))
	if err != nil {
		return nil, err
	}
	out := make([]ScaledEpoch, len(s.Demand))
	replicas, backlog, cutNext := s.Scale.Min, int64(0), false
	for i, d := range s.Demand {
		start := clk.Now()
		e := ScaledEpoch{Epoch: i + 1, Demand: max(d, 0), Replicas: replicas, Cut: cutNext}
		cutNext = false
		backlog += int64(e.Demand)
		if until := l.Status().PausedUntil; !until.IsZero() {
			e.Paused = true
			if until.Before(start.Add(time.Second)) {
				clk.Set(until) // the replicas take tokens when the pause ends
			}
		}
		want := int(min(backlog, int64(replicas)*int64(s.ReplicaRate), ratelimit.MaxTokens))
		if replicas > 0 {
			// The replicas ask even with nothing to read, as a forwarder does.
			g, _ := l.TryAcquire(max(want, 1))
			e.Processed = min(g.Tokens, want)
			l.Deposit(g, g.Tokens-e.Processed)
			e.Throttled = e.Processed < want
		}
		backlog -= int64(e.Processed)
		st := l.Status()
		e.PoolMilli, e.Backlog = st.PoolMilli, backlog
		e.Fits = max(int(math.Ceil(float64(e.PoolMilli)/1000/float64(s.ReplicaRate))), 1)
		if i < len(s.Signals) && s.Signals[i] != NoSignal {
			l.Signal(s.Signals[i])
			cutNext = cfg.Adaptive
		}
		e.Decision = sc.Decide(autoscale.Observation{Replicas: replicas, Pending: backlog, Rate: float64(e.Processed),
			Throttled: e.Throttled, Paused: e.Paused, Cut: e.Cut,
			Limits: []autoscale.Limit{{Pool: float64(e.PoolMilli) / 1000, Max: float64(st.Max)}}})
		replicas = e.Decision.Replicas
		out[i] = e
		clk.Set(start.Add(time.Second))
	}
	return out, nil
}

// describeScaled is the config of a scaled simulation on one line.
func describeScaled(s Scaled) string {
	c := s.Scale
	rate := "learnt"
	if c.ReplicaRate > 0 {
		rate = fmt.Sprint(c.ReplicaRate)
	}
	return fmt.Sprintf("limit: %s, min %d, max %d, ramp-up %v; scale: min %d, max %d, lookback %v, cool-down up %v down %v, "+
		"target %v, per scale-up %d down %d; a replica processes %d/s (rule: %s)",
		s.Limit.Mode, s.Limit.Min, s.Limit.Max, s.Limit.RampUpDuration, c.Min, c.Max, c.Lookback,
		c.ScaleUpCooldown, c.ScaleDownCooldown, c.TargetProcessing, c.ReplicasPerScaleUp, c.ReplicasPerScaleDown,
		s.ReplicaRate, rate)
}

// ScaledSummary counts, over the epochs with a backlog left (where the
// pool, not the demand, sets what the replicas can do), how many ran
// exactly the replicas the pool keeps busy, one more, more than that, and
// fewer.
type ScaledSummary struct {
	Backlogged, AtFits, OneOver, Over, Under int
}

// Summarize counts the epochs of a run as [ScaledSummary] says.
func Summarize(epochs []ScaledEpoch) ScaledSummary {
	var s ScaledSummary
	for _, e := range epochs {
		if e.Backlog == 0 {
			continue
		}
		s.Backlogged++
		switch {
		case e.Replicas == e.Fits:
			s.AtFits++
		case e.Replicas == e.Fits+1:
			s.OneOver++
		case e.Replicas > e.Fits:
			s.Over++
		default:
			s.Under++
		}
	}
	return s
}

// WriteScaledTable writes the config, then per epoch demand, pool,
// processed, backlog, replicas, the replicas the pool keeps busy, the
// rule's answer and its reason, then the [ScaledSummary].
func WriteScaledTable(w io.Writer, s Scaled, epochs []ScaledEpoch) error {
	fmt.Fprintln(w, describeScaled(s))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tdemand\tpool\tprocessed\tbacklog\treplicas\tfits\tnext\treason\t\t")
	for _, e := range epochs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", e.Epoch, e.Demand, formatMilli(e.PoolMilli),
			e.Processed, e.Backlog, e.Replicas, e.Fits, e.Decision.Replicas, e.Decision.Reason, scaledNotes(e))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sum := Summarize(epochs)
	_, err := fmt.Fprintf(w, "epochs with a backlog: %d; replicas = fits in %d, fits+1 in %d, more in %d, fewer in %d\n",
		sum.Backlogged, sum.AtFits, sum.OneOver, sum.Over, sum.Under)
	return err
}

// scaledNotes is what happened to the limit in an epoch.
func scaledNotes(e ScaledEpoch) string {
	var n []string
	if e.Throttled {
		n = append(n, "throttled")
	}
	if e.Cut {
		n = append(n, "cut")
	}
	if e.Paused {
		n = append(n, "paused")
	}
	return strings.Join(n, " ")
}

// WriteScaledCSV writes the epochs as CSV:
// epoch,demand,pool,processed,backlog,replicas,fits,next,reason,throttled,cut,paused.
func WriteScaledCSV(w io.Writer, epochs []ScaledEpoch) error {
	var b strings.Builder
	b.WriteString("epoch,demand,pool,processed,backlog,replicas,fits,next,reason,throttled,cut,paused\n")
	for _, e := range epochs {
		fmt.Fprintf(&b, "%d,%d,%s,%d,%d,%d,%d,%d,%s,%d,%d,%d\n", e.Epoch, e.Demand, formatMilli(e.PoolMilli), e.Processed,
			e.Backlog, e.Replicas, e.Fits, e.Decision.Replicas, e.Decision.Reason, flag01(e.Throttled), flag01(e.Cut), flag01(e.Paused))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
