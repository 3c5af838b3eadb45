package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/bench"
	"github.com/sluiceflow/sluice/internal/spawn"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// slowMapLimit is the rate limit of BenchmarkStreamingSlowMap, messages a
// second.
const slowMapLimit = 20000

// slowMapYAML is generator → slowcat (10ms a message) → blackhole, limited to
// slowMapLimit a second, reading batches of 100 with up to 500 messages in
// flight; streaming sets spec.streaming.
func slowMapYAML(bin string, streaming bool) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: bench-slow-map
spec:
  streaming: %t
  limits:
    readBatchSize: 100
    concurrency: 500
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000000000000
      duration: 1s
      msgSize: 8
  udf:
    container:
      image: slowcat
      command: [%q]
  sink:
    blackhole: {}
`, streaming, slowMapLimit, slowMapLimit, bin)
}

// BenchmarkStreamingSlowMap measures a MonoVertex whose map (the slowcat
// example, its own process) takes 10ms a message, limited to 20,000 messages
// a second, reading batches of 100 with limits.concurrency 500: one batch at
// a time, with NUMAFLOW_READ_AHEAD, and with spec.streaming. Each of b.N
// rounds runs the three in turn for 4s; it reports the median messages a
// second of each and its share of the limit.
func BenchmarkStreamingSlowMap(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "slowcat")
	if out, err := exec.Command("go", "build", "-o", bin, "../../pkg/sdk/examples/slowcat").CombinedOutput(); err != nil {
		b.Fatalf("building slowcat: %v\n%s", err, out)
	}
	kinds := []struct {
		name      string
		streaming bool
		opts      []vertex.Option
	}{
		{"sequential", false, nil},
		{"read-ahead", false, []vertex.Option{vertex.WithReadAhead(true)}},
		{"streaming", true, nil},
	}
	targets := make([]*bench.Target, len(kinds))
	for i, k := range kinds {
		f, err := vertexconfig.Parse([]byte(slowMapYAML(bin, k.streaming)))
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = bench.NewTarget(f)
		targets[i].VertexOptions = k.opts
		if targets[i].SocketDir, err = os.MkdirTemp("", "u"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(targets[i].SocketDir) })
		g, err := spawn.Start(f, targets[i].SocketDir, spawn.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(g.Stop)
	}
	rates := make([][]float64, len(kinds))
	b.ResetTimer()
	for range b.N {
		for i := range kinds {
			n, elapsed, err := bench.Measure(func() (bench.Runner, error) { return targets[i].Build(context.Background(), true) }, 4*time.Second)
			if err != nil {
				b.Fatalf("%s: %v", kinds[i].name, err)
			}
			rates[i] = append(rates[i], n/elapsed.Seconds())
		}
	}
	b.StopTimer()
	for i, k := range kinds {
		m := bench.Median(rates[i])
		b.ReportMetric(m, k.name+"-msg/s")
		b.ReportMetric(m/slowMapLimit, k.name+"/limit")
	}
	b.ReportMetric(0, "ns/op")
}
