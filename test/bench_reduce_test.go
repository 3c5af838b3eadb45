package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// reduceBenchPipeline is the YAML of a three-vertex pipeline on JetStream at
// url: a generator of 100 keys that never runs dry (in), a middle vertex
// (mid) given as its udf block at indent 6, and a blackhole sink (out).
func reduceBenchPipeline(name, url, mid string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  limits:
    readBatchSize: 500
  watermark:
    maxDelay: 0s
` + jetStreamISB(url, "") + `  vertices:
    - name: in
      source:
        generator:
          rpu: 1000000000000
          duration: 100ms
          msgSize: 8
          keyCount: 100
    - name: mid
` + mid + `    - name: out
      sink:
        blackhole: {}
  edges:
    - from: in
      to: mid
    - from: mid
      to: out
`
}

// reduceBenchCase is a mid vertex of BenchmarkReducePipeline: its udf
// block at indent 6 and whether it reduces.
type reduceBenchCase struct {
	name   string
	udf    func(bins map[string]string) string
	reduce bool
}

// reduceBenchCases are the built-in cat, the SDK's cat example, the built-in
// keyed count over fixed windows of 1s with the write-ahead log
// (persistentVolumeClaim) and without (no_store), and the SDK's counter
// example with the log.
var reduceBenchCases = []reduceBenchCase{
	{"map-only", func(map[string]string) string { return "      udf:\n        builtin:\n          name: cat\n" }, false},
	{"map-only-udf", func(bins map[string]string) string { return udContainerAt6(bins["cat"]) }, false},
	{"reduce-wal", func(map[string]string) string {
		return "      udf:\n        builtin:\n          name: count\n" + groupBy1s("persistentVolumeClaim: {volumeSize: 1Gi}")
	}, true},
	{"reduce-no_store", func(map[string]string) string {
		return "      udf:\n        builtin:\n          name: count\n" + groupBy1s("no_store: {}")
	}, true},
	{"reduce-wal-udf", func(bins map[string]string) string {
		return udContainerAt6(bins["counter"]) + groupBy1s("persistentVolumeClaim: {volumeSize: 1Gi}")
	}, true},
}

// reduceBenchRatios are the cases BenchmarkReducePipeline compares, by
// index into reduceBenchCases: each reduce with the map of its kind, and the
// built-in count with the log against it without.
var reduceBenchRatios = [][2]int{{2, 0}, {3, 0}, {4, 1}, {2, 3}}

// udContainerAt6 is a udf block at indent 6 running the command bin.
func udContainerAt6(bin string) string {
	return "      udf:\n        container:\n          command: [" + strconv.Quote(bin) + "]\n"
}

// groupBy1s is a groupBy block, keyed, over fixed windows of 1s, with the
// given storage.
func groupBy1s(storage string) string {
	return "        groupBy:\n          keyed: true\n          window:\n            fixed:\n              length: 1s\n" +
		"          storage:\n            " + storage + "\n"
}

// BenchmarkReducePipeline measures the messages a second the vertex before
// the sink reads in generator | mid | blackhole on JetStream (a nats-server
// on loopback, file storage), each vertex its own vertex run process, mid
// being a map that copies its input (map-only: the built-in cat, and the
// SDK's cat example over gRPC; counted as what the sink writes) or a keyed
// count over 1s fixed windows of the generator's 100 keys (the built-in count
// with the write-ahead log and with no_store, and the SDK's counter example
// with the log; counted as what the reduce reads, sluice_reduce_read_total).
// Each of b.N rounds runs every case once, each first in turn, for 5s after
// 2s of warm-up, and logs a line of its rates, with each reduce's late
// messages, windows closed, results and the size of its state directory. It
// reports the median rates, and the medians over the rounds of the ratios of
// reduceBenchRatios, each of two rates measured in the same round.
func BenchmarkReducePipeline(b *testing.B) {
	nats := natstest.Start(b, natstest.Options{})
	bins := map[string]string{}
	for _, name := range []string{"cat", "counter"} {
		bins[name] = filepath.Join(b.TempDir(), name)
		if out, err := exec.Command("go", "build", "-o", bins[name], "../pkg/sdk/examples/"+name).CombinedOutput(); err != nil {
			b.Fatalf("building example %s: %v\n%s", name, err, out)
		}
	}
	cases := reduceBenchCases
	rates := make([][]float64, len(cases))
	b.ResetTimer()
	for round := range b.N {
		line := fmt.Sprintf("round %d of %d:", round+1, b.N)
		for j := range cases {
			i := (round + j) % len(cases) // each case first in turn
			c := cases[i]
			yaml := reduceBenchPipeline(fmt.Sprintf("rb%d-%d", round, i), nats.URL, c.udf(bins))
			rate, note := reducePipelineRate(b, yaml, c.reduce)
			line += fmt.Sprintf(" %s %.0f%s;", c.name, rate, note)
			rates[i] = append(rates[i], rate)
		}
		b.Log(line)
	}
	b.StopTimer()
	for i, c := range cases {
		b.ReportMetric(median(rates[i]), c.name+"-msg/s")
	}
	for _, r := range reduceBenchRatios {
		ratios := make([]float64, b.N)
		for round := range ratios {
			ratios[round] = rates[r[0]][round] / rates[r[1]][round]
		}
		b.ReportMetric(median(ratios), cases[r[0]].name+"/"+cases[r[1]].name)
	}
	b.ReportMetric(0, "ns/op")
}

// reducePipelineRate runs the pipeline of yaml, one process a vertex, and
// returns the messages a second mid reads (reduce) or out writes (not), and
// for a reduce a note of its late messages, windows closed, results and the
// bytes in its state directory.
func reducePipelineRate(b *testing.B, yaml string, reduce bool) (rate float64, note string) {
	cfg := writeConfig(b, yaml)
	state := b.TempDir()
	var procs []*proc
	for _, v := range []string{"out", "mid", "in"} {
		uds, err := os.MkdirTemp("", "uds")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(uds) })
		procs = append(procs, start(b, "run", "-f", cfg, "--vertex", v, "--replica", "0", "--spawn", "--uds-dir", uds,
			"--state-dir", state, "--metrics-addr", "127.0.0.1:0"))
	}
	out, mid := procs[0].metricsAddr(), procs[1].metricsAddr()
	procs[2].metricsAddr()
	count := func() float64 { return metricValues(b, out, "sluice_forward_write_total")["out"] }
	if reduce {
		count = func() float64 { return metricSum(b, mid, "sluice_reduce_read_total") }
	}
	time.Sleep(2 * time.Second) // warm up: every vertex running, buffers filled
	from, start := count(), time.Now()
	time.Sleep(5 * time.Second)
	rate = (count() - from) / time.Since(start).Seconds()
	if reduce {
		note = fmt.Sprintf(" (late %.0f, windows closed %.0f, results %.0f, state %d B)", metricSum(b, mid, "sluice_reduce_late_total"),
			metricSum(b, mid, "sluice_reduce_windows_closed_total"), metricSum(b, mid, "sluice_reduce_results_total"), dirSize(state))
	}
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
			b.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	return rate, note
}

// metricSum returns the sum of every series of a metric at addr's /metrics.
func metricSum(tb testing.TB, addr, name string) float64 {
	tb.Helper()
	code, body := httpGet(tb, "http://"+addr+"/metrics")
	if code != 200 {
		tb.Fatalf("/metrics: %d", code)
	}
	sum := 0.0
	re := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// median returns the median of rates.
func median(rates []float64) float64 {
	s := slices.Sorted(slices.Values(rates))
	return s[len(s)/2]
}

// dirSize returns the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
