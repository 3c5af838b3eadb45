package test

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// orderedBenchPipeline is a generator that never runs dry (six keys) | the
// built-in cat (3 partitions) | blackhole (3 partitions), reading batches
// of 500, with spec.ordered.enabled as ordered and isb added to spec.
func orderedBenchPipeline(name string, ordered bool, isb string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  ordered:
    enabled: ` + strconv.FormatBool(ordered) + `
  limits:
    readBatchSize: 500
` + isb + `  vertices:
    - name: in
      source:
        generator:
          rpu: 1000000000000
          duration: 1s
          msgSize: 8
          keyCount: 6
    - name: cat
      partitions: 3
      udf:
        builtin:
          name: cat
    - name: out
      partitions: 3
      sink:
        blackhole: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`
}

// orderedBenchCases are the cases of BenchmarkOrderedPipeline: the same
// pipeline unordered and ordered, in one process on in-memory buffers, and
// on JetStream with a process per replica (in; cat and out, 3 each).
var orderedBenchCases = []struct {
	name      string
	ordered   bool
	jetstream bool
}{
	{"memory-unordered", false, false},
	{"memory-ordered", true, false},
	{"jetstream-unordered", false, true},
	{"jetstream-ordered", true, true},
}

// BenchmarkOrderedPipeline measures the messages a second the sink writes
// in orderedBenchPipeline, unordered and ordered, in one process and on
// JetStream (a nats-server on loopback) with a process per replica. Each of
// b.N rounds runs every case once, each first in turn, for 4s after 2s of
// warm-up (a JetStream case on a nats-server of its own), and logs a line
// of the rates; it reports the median rates and
// the medians over the rounds of ordered/unordered, both measured in the
// same round:
//
//	go test -run '^$' -bench BenchmarkOrderedPipeline -benchtime 3x ./test/
func BenchmarkOrderedPipeline(b *testing.B) {
	cases := orderedBenchCases
	rates := make([][]float64, len(cases))
	b.ResetTimer()
	for round := range b.N {
		line := fmt.Sprintf("round %d of %d:", round+1, b.N)
		for j := range cases {
			i := (round + j) % len(cases)
			c := cases[i]
			name := fmt.Sprintf("ob%d-%d", round, i)
			var rate float64
			if c.jetstream {
				nats := natstest.Start(b, natstest.Options{})
				rate = orderedRateOnJetStream(b, orderedBenchPipeline(name, c.ordered, jetStreamISB(nats.URL, "")))
				nats.Stop()
			} else {
				rate = orderedRateInOneProcess(b, orderedBenchPipeline(name, c.ordered, ""))
			}
			line += fmt.Sprintf(" %s %.0f;", c.name, rate)
			rates[i] = append(rates[i], rate)
		}
		b.Log(line)
	}
	b.StopTimer()
	for i, c := range cases {
		b.ReportMetric(median(rates[i]), c.name+"-msg/s")
	}
	for _, r := range [][2]int{{1, 0}, {3, 2}} {
		ratios := make([]float64, b.N)
		for round := range ratios {
			ratios[round] = rates[r[0]][round] / rates[r[1]][round]
		}
		b.ReportMetric(median(ratios), cases[r[0]].name+"/"+cases[r[1]].name)
	}
	b.ReportMetric(0, "ns/op")
}

// orderedBenchWarmup and orderedBenchSpan are how long a case runs before
// and while it is measured.
const (
	orderedBenchWarmup = 2 * time.Second
	orderedBenchSpan   = 4 * time.Second
)

// orderedRateInOneProcess runs yaml in one process and returns the messages
// a second out writes.
func orderedRateInOneProcess(b *testing.B, yaml string) float64 {
	p := start(b, "run", "-f", writeConfig(b, yaml), "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	count := func() float64 { return metricValues(b, addr, "sluice_forward_write_total")["out"] }
	rate := measureRate(count)
	if code, _ := p.stop(syscall.SIGTERM, 60*time.Second); code != 0 {
		b.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	return rate
}

// orderedRateOnJetStream runs yaml with a process per replica (in, cat-0..2,
// out-0..2) and returns the messages a second the out replicas write.
func orderedRateOnJetStream(b *testing.B, yaml string) float64 {
	cfg := writeConfig(b, yaml)
	var procs, outs []*proc
	vertexProc := func(vertex string, replica int) *proc {
		uds, err := os.MkdirTemp("", "uds")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(uds) })
		p := start(b, "run", "-f", cfg, "--vertex", vertex, "--replica", strconv.Itoa(replica), "--uds-dir", uds,
			"--metrics-addr", "127.0.0.1:0")
		procs = append(procs, p)
		return p
	}
	for i := range orderedParts {
		outs = append(outs, vertexProc("out", i))
		vertexProc("cat", i)
	}
	vertexProc("in", 0)
	addrs := make([]string, len(procs))
	for i, p := range procs {
		addrs[i] = p.metricsAddr()
	}
	count := func() float64 {
		n := 0.0
		for i, p := range procs {
			for _, o := range outs {
				if p == o {
					n += metricValues(b, addrs[i], "sluice_forward_write_total")["out"]
				}
			}
		}
		return n
	}
	rate := measureRate(count)
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 60*time.Second); code != 0 {
			b.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	return rate
}

// measureRate returns the rate count grows at over orderedBenchSpan, after
// orderedBenchWarmup.
func measureRate(count func() float64) float64 {
	time.Sleep(orderedBenchWarmup)
	from, start := count(), time.Now()
	time.Sleep(orderedBenchSpan)
	return (count() - from) / time.Since(start).Seconds()
}
