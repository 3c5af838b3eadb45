package main

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/bench"
	"github.com/sluiceflow/sluice/internal/natstest"
)

// BenchmarkPipelineWatermarks measures what watermarks cost: the pipeline
// of BenchmarkPipeline (generator → cat → blackhole, one process, no rate
// limit) with spec.watermark.disabled and without, on in-memory buffers and
// on JetStream, alternating, 1s each after a warm-up. It reports the medians
// of the messages a second the sink wrote and the on/off ratios.
func BenchmarkPipelineWatermarks(b *testing.B) {
	nats := natstest.Start(b, natstest.Options{})
	cases := []struct {
		name        string
		onJetStream bool
	}{{"memory", false}, {"jetstream", true}}
	targets := make([][2]*bench.Target, len(cases))
	for i, c := range cases {
		for on := range 2 {
			f := pipelineBench(b, nats.URL, 1)
			f.Pipeline.Spec.Watermark = &config.Watermark{Disabled: on == 0}
			t := bench.NewTarget(f)
			t.OnJetStream = c.onJetStream
			targets[i][on] = t
		}
	}
	rates := make([][2][]float64, len(cases))
	b.ResetTimer()
	for range b.N {
		for i := range cases {
			for on := range 2 {
				n, elapsed, err := bench.Measure(func() (bench.Runner, error) { return targets[i][on].Build(context.Background(), false) }, time.Second)
				if err != nil {
					b.Fatalf("%s: %v", cases[i].name, err)
				}
				rates[i][on] = append(rates[i][on], n/elapsed.Seconds())
			}
		}
	}
	b.StopTimer()
	for i, c := range cases {
		off, on := bench.Median(rates[i][0]), bench.Median(rates[i][1])
		b.ReportMetric(off, c.name+"-nowm-msg/s")
		b.ReportMetric(on, c.name+"-wm-msg/s")
		b.ReportMetric(on/off, c.name+"-wm/nowm")
	}
	b.ReportMetric(0, "ns/op")
}
