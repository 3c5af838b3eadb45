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
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// mapBenchYAML is generator → map → blackhole at full speed, with a rate limit far
// above capacity, as in config/examples/bench.yaml; udf is the spec.udf block.
func mapBenchYAML(udf string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: bench-map
spec:
  limits:
    readBatchSize: 500
    rateLimit:
      max: 1000000000
      min: 1000000000
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000000000000
      duration: 1s
      msgSize: 8
  udf:
` + udf + `  sink:
    blackhole: {}
`
}

// BenchmarkMapUDF measures whole MonoVertices, generator → map → blackhole, whose
// map is the built-in cat, the cat example as a unary map UDF, or the batchcat
// example as a batch map UDF, each a process of its own on a unix socket. Each of
// b.N rounds runs the three in turn for 1s (after a warm-up) so that they share
// the machine's moods; it reports the median messages a second of each and the
// ratios of the UDFs to the built-in.
func BenchmarkMapUDF(b *testing.B) {
	dir := b.TempDir()
	kinds := []struct{ name, udf, example string }{
		{"builtin", "    builtin:\n      name: cat\n", ""},
		{"unary", "", "cat"},
		{"batch", "", "batchcat"},
	}
	targets := make([]*bench.Target, len(kinds))
	for i, k := range kinds {
		udf := k.udf
		if k.example != "" {
			bin := filepath.Join(dir, k.example)
			if out, err := exec.Command("go", "build", "-o", bin, "../../pkg/sdk/examples/"+k.example).CombinedOutput(); err != nil {
				b.Fatalf("building %s: %v\n%s", k.example, err, out)
			}
			udf = fmt.Sprintf("    container:\n      image: %s\n      command: [%q]\n", k.example, bin)
		}
		f, err := vertexconfig.Parse([]byte(mapBenchYAML(udf)))
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = bench.NewTarget(f)
		if k.example != "" {
			// A directory of its own, short enough for a socket path.
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
	}
	rates := make([][]float64, len(kinds))
	b.ResetTimer()
	for range b.N {
		for i := range kinds {
			n, elapsed, err := bench.Measure(func() (bench.Runner, error) { return targets[i].Build(context.Background(), true) }, time.Second)
			if err != nil {
				b.Fatalf("%s: %v", kinds[i].name, err)
			}
			rates[i] = append(rates[i], n/elapsed.Seconds())
		}
	}
	b.StopTimer()
	for i, k := range kinds {
		b.ReportMetric(bench.Median(rates[i]), k.name+"-msg/s")
		if i > 0 {
			b.ReportMetric(bench.Median(rates[i])/bench.Median(rates[0]), k.name+"/builtin")
		}
	}
	b.ReportMetric(0, "ns/op")
}
