package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/natstest"
)

// pipelineBenchYAML is generator → cat → blackhole as three vertices, with a
// rate limit far above capacity on each, on JetStream at url (frameSize
// frame) when run there.
func pipelineBenchYAML(url string, frame int) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: bench-pipeline
spec:
  limits:
    readBatchSize: 500
    rateLimit:
      max: 1000000000
      min: 1000000000
      rampUpDuration: 0s
  isb:
    jetstream:
      url: %s
      frameSize: %d
  vertices:
    - name: in
      source:
        generator:
          rpu: 1000000000000
          duration: 1s
          msgSize: 8
    - name: cat
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        blackhole: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`, url, frame)
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
	targets := make([]benchTarget, len(cases))
	for i, c := range cases {
		f, err := config.Parse([]byte(pipelineBenchYAML(nats.URL, c.frame)))
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = benchTargetOf(f, c.onJetStream)
	}
	rates := make([][2][]float64, len(cases))
	b.ResetTimer()
	for range b.N {
		for i := range cases {
			for mode := range 2 {
				n, elapsed, err := benchRun(targets[i].build, runtimeOptions{noRateLimit: mode == 0}, time.Second)
				if err != nil {
					b.Fatalf("%s: %v", cases[i].name, err)
				}
				rates[i][mode] = append(rates[i][mode], n/elapsed.Seconds())
			}
		}
	}
	b.StopTimer()
	for i, c := range cases {
		off, on := median(rates[i][0]), median(rates[i][1])
		b.ReportMetric(off, c.name+"-off-msg/s")
		b.ReportMetric(on, c.name+"-on-msg/s")
		b.ReportMetric(on/off, c.name+"-on/off")
	}
	b.ReportMetric(0, "ns/op")
}
