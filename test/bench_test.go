package test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// BenchmarkPipelineProcesses measures generator → cat → blackhole with each
// vertex its own vertex run process, on JetStream (a nats-server on loopback,
// file storage), with messages alone and in frames of 64: the messages a
// second the sink vertex writes over 5s once all three run, for each of b.N
// rounds, reported as the median.
func BenchmarkPipelineProcesses(b *testing.B) {
	for _, frame := range []int{1, 64} {
		b.Run(fmt.Sprintf("frameSize=%d", frame), func(b *testing.B) {
			var rates []float64
			for range b.N {
				rates = append(rates, pipelineProcessesRate(b, frame))
			}
			slices.Sort(rates)
			b.ReportMetric(rates[len(rates)/2], "msg/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func pipelineProcessesRate(b *testing.B, frame int) float64 {
	nats := natstest.Start(b, natstest.Options{})
	example, err := os.ReadFile("../config/examples/bench-pipeline.yaml")
	if err != nil {
		b.Fatal(err)
	}
	yaml := strings.Replace(string(example), "nats://127.0.0.1:4222", nats.URL, 1)
	yaml = strings.Replace(yaml, "frameSize: 1 ", fmt.Sprintf("frameSize: %d ", frame), 1)
	cfg := writeConfig(b, yaml)
	var procs []*proc
	for _, v := range []string{"out", "cat", "in"} {
		procs = append(procs, start(b, "run", "-f", cfg, "--vertex", v, "--metrics-addr", "127.0.0.1:0"))
	}
	addr := procs[0].metricsAddr()
	for _, p := range procs[1:] {
		p.metricsAddr()
	}
	written := func() float64 { return metricValues(b, addr, "sluice_forward_write_total")["out"] }
	time.Sleep(2 * time.Second) // warm up: every vertex running, buffers filled
	from, start := written(), time.Now()
	time.Sleep(5 * time.Second)
	rate := (written() - from) / time.Since(start).Seconds()
	for _, p := range procs {
		p.stop(syscall.SIGTERM, 20*time.Second)
	}
	return rate
}
