package test

import (
	"context"
	"encoding/base64"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/numaflowgo"
)

// envNumaflowGo names a directory holding the source of numaflow-go
// (Numaflow's Go SDK), whose examples TestReduceNumaflowGo builds and runs.
const envNumaflowGo = numaflowgo.EnvDir

// numaflowGoExamples caches the numaflow-go examples built, by name; it
// shares examplesMu with example.
var numaflowGoExamples = map[string]string{}

// numaflowGoExample builds numaflow-go's example examples/<name> of the
// source tree src as it is, against src (numaflowgo.Build), once per run.
func numaflowGoExample(t *testing.T, src, name string) string {
	t.Helper()
	examplesMu.Lock()
	defer examplesMu.Unlock()
	if bin, ok := numaflowGoExamples[name]; ok {
		return bin
	}
	bin := filepath.Join(filepath.Dir(vertexBin), "numaflow-go-"+strings.ReplaceAll(name, "/", "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := numaflowgo.Build(ctx, src, name, bin); err != nil {
		t.Fatalf("%s=%s: %v", envNumaflowGo, src, err)
	}
	numaflowGoExamples[name] = bin
	return bin
}

// TestReduceNumaflowGo runs numaflow-go's reduce examples, unchanged, as
// the container of the count vertex of the keyed pipeline, in one process
// with --spawn and no --uds-dir, so that they serve in /var/run/numaflow,
// the only directory they know. The counters' results add up, per window
// and key, to the number of messages generated in it; the sums', with every
// payload the number 7 (the generator's valueBlob), to 7 times that. The
// reducers send one result per window, the reduce streamers several (every
// 10 messages; whenever the sum reaches 100) and the rest at the end. It is
// skipped without NUMAFLOW_GO_DIR, and when /var/run/numaflow cannot be
// had (another sluice process holds it, or it cannot be created).
func TestReduceNumaflowGo(t *testing.T) {
	src := os.Getenv(envNumaflowGo)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's reduce examples are not run (set it to a numaflow-go source tree)", envNumaflowGo)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		example       string
		window        string
		length, slide int64
		value         int // the payload when not 0, else the generator's JSON
		stream        bool
	}{
		{"reducer/counter", fixedWindow, 2000, 2000, 0, false},
		{"reducer/counter", slidingWindow, 3000, 1000, 0, false},
		{"reducer/sum", fixedWindow, 2000, 2000, 7, false},
		{"reducestreamer/counter", slidingWindow, 3000, 1000, 0, true},
		{"reducestreamer/sum", fixedWindow, 2000, 2000, 7, true},
	} {
		name := tt.example + "," + strings.TrimSuffix(strings.Fields(tt.window)[0], ":")
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each container has a /var/run/numaflow of its own
			bin := numaflowGoExample(t, src, tt.example)
			window := tt.window
			if tt.stream {
				window += "              streaming: true\n"
			}
			yaml := reducePipeline("red-nfgo", window, bin, jetStreamISB("nats://127.0.0.1:9", ""), "")
			if tt.value != 0 {
				blob := base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(tt.value)))
				if !strings.Contains(yaml, "keyCount: 3\n") {
					t.Fatal("the keyed pipeline's generator has no keyCount")
				}
				yaml = strings.Replace(yaml, "keyCount: 3\n", "keyCount: 3\n          valueBlob: "+blob+"\n", 1)
			}
			raw, res, arr := runNumaflowGoPipeline(t, yaml, tt.example, tt.stream)
			if tt.example == "reducer/counter" {
				checkCounts(t, raw, res, tt.length, tt.slide, 4)
				return
			}
			checkTotals(t, raw, res, tt.length, tt.slide, max(tt.value, 1), !tt.stream, 4)
			if tt.stream {
				// The first window of a key may be too short for the
				// function to send before its end.
				checkEarly(t, arr, res, tt.length, 3)
			}
		})
	}
}

// numaflowGoStarted waits until p has started its containers, which
// numaflow-go's servers, what, serve in: each vertex's in a /var/run/numaflow
// of its own. It skips the test where p refuses, since they would share the
// directory (no mount namespaces here).
func numaflowGoStarted(t *testing.T, p *proc, what string) {
	t.Helper()
	p.waitFor(20*time.Second, "the user-defined containers started", func() bool {
		s := p.stderr.String()
		return strings.Contains(s, "starting the user-defined containers") || strings.Contains(s, "would share")
	})
	if strings.Contains(p.stderrText(), "would share") {
		t.Skipf("%s cannot serve here, in a %s of their own:\n%s", what, "/var/run/numaflow", p.stderrText())
	}
}

// runNumaflowGoPipeline runs the pipeline yaml, whose only container is
// numaflow-go's example, in one process with --spawn and no --uds-dir, until
// each key has four windows, and returns what its log sinks printed, and
// when each line came. With open (a reduce streamer, whose results come
// while their windows are open), it waits for four windows of each key
// that the sinks' watermarks have passed, whose results have all been
// printed, and returns the results of those windows alone. It skips the
// test when /var/run/numaflow is not to be had.
func runNumaflowGoPipeline(t *testing.T, yaml, example string, open bool) (raw, results []sinkLine, arr *arrivals) {
	t.Helper()
	p := start(t, "run", "-f", writeConfig(t, yaml), "--spawn", "--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	numaflowGoStarted(t, p, "numaflow-go's "+example)
	arr = &arrivals{at: map[string]time.Time{}}
	addr := p.metricsAddr()
	closed := int64(math.MaxInt64) // the windows ending at or before it have all their results printed (ms)
	var fetched time.Time
	p.waitFor(90*time.Second, "four windows of each key", func() bool {
		arr.note(p.lines)
		_, res := nfgoSinkLines(p.lines)
		if open {
			if time.Since(fetched) > 250*time.Millisecond {
				closed, fetched = sinksWatermark(t, addr), time.Now()
			}
			res = windowsBy(res, closed)
		}
		return enoughWindows(res, 4)
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	raw, results = nfgoSinkLines(p.stdoutLines())
	if open {
		t.Logf("the windows ending by %s, which both sinks' watermarks passed", time.UnixMilli(closed).UTC().Format("15:04:05.000"))
		results = windowsBy(results, closed)
	}
	return raw, results, arr
}

// sinksWatermark is the lower of the watermarks of the pipeline's sinks,
// counts and raw, in ms: every result of a window ending by it, and every
// message generated before it, has been printed.
func sinksWatermark(t *testing.T, addr string) int64 {
	t.Helper()
	wm := metricValues(t, addr, "sluice_watermark_seconds")
	counts, ok1 := wm["counts"]
	raw, ok2 := wm["raw"]
	if !ok1 || !ok2 {
		return -1
	}
	return int64(math.Round(min(counts, raw) * 1000))
}

// windowsBy is the results of windows ending at or before end (ms).
func windowsBy(results []sinkLine, end int64) []sinkLine {
	var out []sinkLine
	for _, r := range results {
		if r.eventTime+1 <= end {
			out = append(out, r)
		}
	}
	return out
}

// checkEarly checks that a reduce streamer's results came while their
// windows were open, as the function sent them: every key has at least
// minWindows windows with a result that came before the window's end,
// which the watermark (with no maxDelay) cannot pass before the clock
// does. It logs how soon after its window opened (length ms before its
// end) the first result of a window came.
func checkEarly(t *testing.T, arr *arrivals, results []sinkLine, length int64, minWindows int) {
	t.Helper()
	windows, n := arr.early(results)
	if len(windows) != 3 {
		t.Errorf("results before their window's end for keys %v; want 3 keys", windows)
	}
	for k, c := range windows {
		if c < minWindows {
			t.Errorf("key %s: %d windows with a result before their end; want at least %d", k, c, minWindows)
		}
	}
	t.Logf("%d of %d results came before their window's end, in windows %v; %s", n, len(results), windows, arr.soonest(results, length))
}

// TestMapNumaflowGoInPipeline runs numaflow-go's cat example, unchanged, as
// the map of the keyed pipeline, whose requests carry the vertex's
// watermark, with the built-in count as the reduce: every window's count is
// what was generated in it.
func TestMapNumaflowGoInPipeline(t *testing.T) {
	src := os.Getenv(envNumaflowGo)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's cat example is not run (set it to a numaflow-go source tree)", envNumaflowGo)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := numaflowGoExample(t, src, "mapper/cat")
	yaml := reducePipeline("map-nfgo", fixedWindow, "COUNTER", jetStreamISB("nats://127.0.0.1:9", ""), "")
	for old, repl := range map[string]string{
		"        builtin:\n          name: cat\n":                "        container:\n          command: [" + strconv.Quote(bin) + "]\n",
		"        container:\n          command: [\"COUNTER\"]\n": "        builtin:\n          name: count\n",
	} {
		if !strings.Contains(yaml, old) {
			t.Fatalf("the keyed pipeline has no %q", old)
		}
		yaml = strings.Replace(yaml, old, repl, 1)
	}
	raw, res, _ := runNumaflowGoPipeline(t, yaml, "mapper/cat", false)
	checkCounts(t, raw, res, 2000, 2000, 4)
}

// nfgoSinkLines parses log-sink lines as sinkLines does, but tells the
// generator's messages from the results by their IDs (in-<replica>-<n>),
// whatever their payloads.
func nfgoSinkLines(lines []string) (raw, results []sinkLine) {
	for _, l := range lines {
		m := sinkLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		et, _ := strconv.ParseInt(m[3], 10, 64)
		s := sinkLine{payload: m[1], keys: m[2], eventTime: et, id: m[4]}
		if strings.HasPrefix(s.id, "in-") {
			raw = append(raw, s)
		} else {
			results = append(results, s)
		}
	}
	return raw, results
}

// checkTotals checks that the results of each window and key add up to per
// times the number of messages of that key generated in it, with one result
// per window when single; that no key misses a window before its last; and
// that every key has at least minWindows. length and slide are the
// window's, in ms.
func checkTotals(t *testing.T, raw, results []sinkLine, length, slide int64, per int, single bool, minWindows int) {
	t.Helper()
	want := map[windowKey]int{}
	for _, m := range raw {
		for end := (m.eventTime/slide + 1) * slide; end-length <= m.eventTime; end += slide {
			want[windowKey{m.keys, end}] += per
		}
	}
	got, n := map[windowKey]int{}, map[windowKey]int{}
	last := map[string]int64{}
	for _, r := range results {
		v, err := strconv.Atoi(r.payload)
		if err != nil {
			t.Fatalf("a result that is no number: %+v", r)
		}
		w := windowKey{r.keys, r.eventTime + 1}
		got[w] += v
		n[w]++
		last[r.keys] = max(last[r.keys], w.end)
	}
	windows := map[string]int{}
	for w, total := range got {
		if total != want[w] {
			t.Errorf("window ending %s of key %s: results add up to %d in %d results, generated %d", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, total, n[w], want[w])
		}
		if single && n[w] != 1 {
			t.Errorf("window ending %s of key %s: %d results; want one", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, n[w])
		}
	}
	for w, total := range want {
		if total > 0 && w.end <= last[w.key] {
			if _, ok := got[w]; !ok {
				t.Errorf("window ending %s of key %s (%d) has no result", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, total)
			}
			windows[w.key]++
		}
	}
	if len(windows) != 3 {
		t.Errorf("results for keys %v; want 3 keys", windows)
	}
	for k, c := range windows {
		if c < minWindows {
			t.Errorf("key %s: %d windows; want at least %d", k, c, minWindows)
		}
	}
	t.Logf("%d messages generated; %d results for %d windows: %v", len(raw), len(results), len(got), windows)
}
