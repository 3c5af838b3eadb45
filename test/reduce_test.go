package test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// reducePipeline is the YAML of a pipeline that counts per key and window:
// a generator of three keys (in) writes to a log sink (raw) and to the cat
// map, whose output the counter reduces (count, two partitions), its results
// going to a log sink (counts). window is the groupBy's window block at
// indent 10, counter the counter command, isb added to spec, countLimits
// added to the count vertex (at indent 6).
func reducePipeline(name, window, counter, isb, countLimits string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  limits:
    readBatchSize: 100
    readTimeout: 100ms
  watermark:
    maxDelay: 0s
` + isb + `  vertices:
    - name: in
      source:
        generator:
          rpu: 20
          duration: 100ms
          keyCount: 3
    - name: raw
      sink:
        log: {}
    - name: cat
      udf:
        builtin:
          name: cat
    - name: count
      partitions: 2
      udf:
        container:
          command: [` + strconv.Quote(counter) + `]
        groupBy:
          keyed: true
          window:
` + window + `          storage:
            persistentVolumeClaim:
              volumeSize: 1Gi
` + countLimits + `    - name: counts
      sink:
        log: {}
  edges:
    - from: in
      to: raw
    - from: in
      to: cat
    - from: cat
      to: count
    - from: count
      to: counts
`
}

const (
	fixedWindow   = "            fixed:\n              length: 2s\n"
	slidingWindow = "            sliding:\n              length: 3s\n              slide: 1s\n"
)

// sinkLine is a log-sink line.
type sinkLine struct {
	payload, keys, id string
	eventTime         int64 // ms
}

var sinkLineRE = regexp.MustCompile(`^Payload - (.*) Keys - (.*) EventTime - (-?\d+) Headers - .* ID - (.*)$`)

// sinkLines parses log-sink lines: the generator's messages (a JSON
// payload) and the counter's results (a number).
func sinkLines(t *testing.T, lines []string) (raw, results []sinkLine) {
	t.Helper()
	for _, l := range lines {
		m := sinkLineRE.FindStringSubmatch(l)
		if m == nil {
			continue // not a sink line
		}
		et, _ := strconv.ParseInt(m[3], 10, 64)
		s := sinkLine{payload: m[1], keys: m[2], eventTime: et, id: m[4]}
		if strings.HasPrefix(s.payload, "{") {
			raw = append(raw, s)
		} else {
			results = append(results, s)
		}
	}
	return raw, results
}

// windowKey is a key and the end of one of its windows (ms).
type windowKey struct {
	key string
	end int64
}

// checkCounts checks every result against the messages generated: each
// window's count is the number of messages of its key with an event time in
// it; a window delivered twice (after a crash) has the same count both
// times; no key misses a window before its last; every key has at least
// minWindows. length and slide are the window's, in ms.
func checkCounts(t *testing.T, raw, results []sinkLine, length, slide int64, minWindows int) {
	t.Helper()
	want := map[windowKey]int{}
	for _, m := range raw {
		for end := (m.eventTime/slide + 1) * slide; end-length <= m.eventTime; end += slide {
			want[windowKey{m.keys, end}]++
		}
	}
	got := map[windowKey]int{}
	last := map[string]int64{}
	for _, r := range results {
		n, err := strconv.Atoi(r.payload)
		if err != nil {
			t.Fatalf("a result that is no count: %+v", r)
		}
		w := windowKey{r.keys, r.eventTime + 1}
		if prev, ok := got[w]; ok && prev != n {
			t.Errorf("window %v delivered twice with counts %d and %d", w, prev, n)
		}
		got[w] = n
		last[r.keys] = max(last[r.keys], w.end)
		if n != want[w] {
			t.Errorf("window %v of key %s: count %d, generated %d", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, n, want[w])
		}
	}
	windows := map[string]int{}
	for w, n := range want {
		if n > 0 && w.end <= last[w.key] {
			if _, ok := got[w]; !ok {
				t.Errorf("window ending %s of key %s (%d messages) has no result", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, n)
			}
			windows[w.key]++
		}
	}
	if len(windows) != 3 {
		t.Errorf("results for keys %v; want 3 keys", windows)
	}
	for k, n := range windows {
		if n < minWindows {
			t.Errorf("key %s: %d windows; want at least %d", k, n, minWindows)
		}
	}
	t.Logf("%d messages generated; %d results for %d windows: %v", len(raw), len(results), len(got), windows)
}

// resultWindows counts the distinct windows of each key in results.
func resultWindows(results []sinkLine) map[string]int {
	seen := map[windowKey]bool{}
	out := map[string]int{}
	for _, r := range results {
		if w := (windowKey{r.keys, r.eventTime}); !seen[w] {
			seen[w] = true
			out[r.keys]++
		}
	}
	return out
}

// enoughWindows reports whether each of the three keys has n windows.
func enoughWindows(results []sinkLine, n int) bool {
	w := resultWindows(results)
	if len(w) < 3 {
		return false
	}
	for _, c := range w {
		if c < n {
			return false
		}
	}
	return true
}

// TestReduceInOneProcess runs the keyed count in one process on the memory
// ISB, with a fixed and with a sliding window: every window's count is what
// was generated in it.
func TestReduceInOneProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		window        string
		length, slide int64
		limits        string
	}{
		{"fixed", fixedWindow, 2000, 2000, ""},
		{"sliding", slidingWindow, 3000, 1000, ""},
		// Reads at 150 of the 200 messages a second generated: windows close
		// later, with the same counts.
		{"fixed,throttled", fixedWindow, 2000, 2000, "      limits:\n        rateLimit:\n          max: 150\n          min: 150\n          rampUpDuration: 0s\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, reducePipeline("red-"+strings.ReplaceAll(tt.name, ",", "-"), tt.window, example(t, "counter"), jetStreamISB("nats://127.0.0.1:9", ""), tt.limits))
			started := time.Now()
			p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
			addr := p.metricsAddr()
			p.waitFor(60*time.Second, "four windows of each key", func() bool {
				_, res := sinkLinesLocked(p.lines)
				return enoughWindows(res, 4)
			})
			read := metricValues(t, addr, "sluice_reduce_read_total")["count"]
			elapsed := time.Since(started)
			if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			raw, res := sinkLines(t, p.stdoutLines())
			checkCounts(t, raw, res, tt.length, tt.slide, 4)
			// Every second (epoch) the run touched, 150 at most.
			if most := 150 * (elapsed.Seconds() + 2); tt.limits != "" && read > most {
				t.Errorf("the count vertex read %.0f messages in %v; its rate limit lets it read %.0f at most", read, elapsed, most)
			}
		})
	}
}

// sinkLinesLocked is sinkLines for a waitFor condition: it does not fail.
func sinkLinesLocked(lines []string) (raw, results []sinkLine) {
	for _, l := range lines {
		if m := sinkLineRE.FindStringSubmatch(l); m != nil {
			et, _ := strconv.ParseInt(m[3], 10, 64)
			s := sinkLine{payload: m[1], keys: m[2], eventTime: et, id: m[4]}
			if strings.HasPrefix(s.payload, "{") {
				raw = append(raw, s)
			} else {
				results = append(results, s)
			}
		}
	}
	return raw, results
}

// TestReduceOnJetStream runs the keyed count with every vertex its own
// process on JetStream, the count vertex as two replicas, one per
// partition: with a fixed window; with a sliding one; and with a fixed one
// whose replica 0 is killed with SIGKILL mid-window and started again on
// the same state directory. Every window's count is what was generated in
// it, a window delivered twice has the same count.
func TestReduceOnJetStream(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		window        string
		length, slide int64
		kill          bool
	}{
		{"fixed", fixedWindow, 2000, 2000, false},
		{"sliding", slidingWindow, 3000, 1000, false},
		{"fixed,killed", fixedWindow, 2000, 2000, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testReduceOnJetStream(t, tt.window, tt.length, tt.slide, tt.kill)
		})
	}
}

func testReduceOnJetStream(t *testing.T, window string, length, slide int64, kill bool) {
	nats := natstest.Start(t, natstest.Options{})
	state := t.TempDir()
	cfg := writeConfig(t, reducePipeline("red", window, example(t, "counter"), jetStreamISB(nats.URL, ""), ""))
	countProc := func(replica int) *proc { return vertexProc(t, cfg, "count", replica, "--state-dir", state) }
	counts, raw := vertexProc(t, cfg, "counts", 0), vertexProc(t, cfg, "raw", 0)
	reducers := []*proc{countProc(0), countProc(1)}
	cat := vertexProc(t, cfg, "cat", 0)
	in := vertexProc(t, cfg, "in", 0)
	results := func(n int) func() bool {
		return func() bool {
			_, res := sinkLinesLocked(counts.lines)
			return enoughWindows(res, n)
		}
	}
	counts.waitFor(90*time.Second, "two windows of each key", results(2))
	if kill {
		if _, err := os.Stat(state); err != nil {
			t.Fatal(err)
		}
		reducers[0].stop(syscall.SIGKILL, 10*time.Second)
		time.Sleep(time.Second) // windows stay open while it is down
		reducers[0] = countProc(0)
	}
	counts.waitFor(90*time.Second, "five windows of each key", results(5))
	if code, _ := in.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("in: exit code %d; stderr:\n%s", code, in.stderrText())
	}
	raw.waitQuiet() // raw gets what in wrote before it stopped
	for _, p := range append([]*proc{cat, counts, raw}, reducers...) {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	rawLines, _ := sinkLines(t, raw.stdoutLines())
	_, res := sinkLines(t, counts.stdoutLines())
	checkCounts(t, rawLines, res, length, slide, 5)
	if t.Failed() {
		t.Logf("count-0 stderr:\n%s", reducers[0].stderrText())
	}
}

// waitQuiet waits until p's stdout has stopped growing for 200 ms, for at
// most 10 s: what a process upstream wrote before it stopped has come.
func (p *proc) waitQuiet() {
	for prev, i := -1, 0; i < 50; i++ {
		n := len(p.stdoutLines())
		if n == prev {
			return
		}
		prev = n
		time.Sleep(200 * time.Millisecond)
	}
}
