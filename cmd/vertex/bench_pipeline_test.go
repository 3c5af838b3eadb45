package main

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/bench"
	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// pipelineBench loads config/examples/bench-pipeline.yaml with its
// JetStream server at url and the given frame size.
func pipelineBench(tb testing.TB, url string, frame int) *config.File {
	f, err := vertexconfig.Load("../../config/examples/bench-pipeline.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	js := f.Pipeline.Spec.ISB.JetStream
	fs := uint32(frame)
	js.URL, js.FrameSize = url, &fs
	return f
}

// BenchmarkPipeline measures a three-vertex pipeline, generator → cat →
// blackhole, in one process: on in-memory buffers, and on JetStream (a
// nats-server on loopback, file storage) with each message alone and in
// frames of 64. Each of b.N rounds runs every case with its rate limit off
// and on, 1s each after a warm-up; it reports the medians of the messages a
// second the sink wrote and the on/off ratios.
func BenchmarkPipeline(b *testing.B) {
	nats := natstest.Start(b, natstest.Options{})
	cases := []struct {
		name        string
		frame       int
		onJetStream bool
	}{{"memory", 1, false}, {"jetstream", 1, true}, {"jetstream-frames64", 64, true}}
	targets := make([]*bench.Target, len(cases))
	for i, c := range cases {
		targets[i] = bench.NewTarget(pipelineBench(b, nats.URL, c.frame))
		targets[i].OnJetStream = c.onJetStream
	}
	rates := make([][2][]float64, len(cases))
	b.ResetTimer()
	for range b.N {
		for i := range cases {
			for mode := range 2 {
				n, elapsed, err := bench.Measure(func() (bench.Runner, error) { return targets[i].Build(context.Background(), mode == 1) }, time.Second)
				if err != nil {
					b.Fatalf("%s: %v", cases[i].name, err)
				}
				rates[i][mode] = append(rates[i][mode], n/elapsed.Seconds())
			}
		}
	}
	b.StopTimer()
	for i, c := range cases {
		off, on := bench.Median(rates[i][0]), bench.Median(rates[i][1])
		b.ReportMetric(off, c.name+"-off-msg/s")
		b.ReportMetric(on, c.name+"-on-msg/s")
		b.ReportMetric(on/off, c.name+"-on/off")
	}
	b.ReportMetric(0, "ns/op")
}
