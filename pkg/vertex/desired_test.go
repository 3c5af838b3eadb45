package vertex_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// desiredSpec is a user-defined source → log MonoVertex limited to 100
// messages a second, whose rule scales within [1, 10] on a lookback of a
// second, without cool-downs.
const desiredSpec = `  limits:
    readBatchSize: 500
    readTimeout: 50ms
    rateLimit:
      max: 100
      min: 100
      rampUpDuration: 0s
  scale:
    min: 1
    max: 10
    lookbackSeconds: 1
    scaleUpCooldownSeconds: 0
    scaleDownCooldownSeconds: 0
    targetProcessingSeconds: 1
    replicasPerScaleUp: 10
  source:
    udsource:
      container: {image: source}
  sink:
    log: {}
`

// TestDesiredReplicas runs the scale rule inside a replica on a manual
// clock, a second at a time: a backlog under the limit asks for the
// replicas that drain it (1 replica processing 20/s with 40 pending wants
// ceil((20 + 40/1) / 20) = 3), and a vertex held at its limit (throttled
// at 100/s with 1,000 pending) asks for none more than it has.
func TestDesiredReplicas(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perSecond int
		pending   int64
		want      int
		reason    autoscale.Reason
		throttled bool
	}{
		{name: "under", perSecond: 20, pending: 40, want: 3, reason: autoscale.Backlog},
		{name: "at-limit", perSecond: 300, pending: 1000, want: 1, reason: autoscale.AtLimit, throttled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			src := &withPending{counting: &counting{acked: map[int]bool{}}}
			src.pending.Store(tc.pending)
			serve(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
			clk := clock.NewManual(time.Unix(1_700_000_000, 0))
			reg := prometheus.NewRegistry()
			_, sinkOpt := logSink()
			v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "desired-"+tc.name, desiredSpec)),
				vertex.WithSocketDir(dir), vertex.WithRegisterer(reg), vertex.WithClock(clk), sinkOpt)
			if err != nil {
				t.Fatal(err)
			}
			r := runtest.Start(t, v)
			for sec := 1; sec <= 3; sec++ {
				src.mu.Lock()
				src.count += tc.perSecond
				src.mu.Unlock()
				done := min(tc.perSecond, 100) * sec
				runtest.WaitFor(t, "the second's messages acked", func() bool {
					return src.ackedCount() == done && (!tc.throttled || v.Status().Throttled)
				})
				if n := src.ackedCount(); n != done {
					t.Fatalf("second %d: %d acked; want exactly %d", sec, n, done)
				}
				clk.Advance(time.Second)
				now := clk.Now()
				runtest.WaitFor(t, "the rule's answer", func() bool { _, at := v.Desired(); return at.Equal(now) })
				d, _ := v.Desired()
				if d.Replicas != tc.want || d.Reason != tc.reason {
					t.Fatalf("second %d: %+v; want %d replicas for %v", sec, d, tc.want, tc.reason)
				}
				if g, ok := gaugeValue(t, reg, "sluice_desired_replicas"); !ok || g != float64(tc.want) {
					t.Fatalf("second %d: sluice_desired_replicas = %v (%v); want %d", sec, g, ok, tc.want)
				}
			}
			if err := r.Stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
