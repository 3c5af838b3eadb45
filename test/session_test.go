package test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// sessionTimeout is the session window of the session pipelines, in ms:
// less than the generator's gap between bursts.
const sessionTimeout = 300

// sessionPipeline is the keyed pipeline of reducePipeline with a session
// window of sessionTimeout, its generator making a burst of two messages a
// key every second, so that each burst of a key is one session; counter is
// the session reducer's command, or "" for the built-in count; value, when
// not 0, is every payload (the generator's valueBlob); natsURL is the
// JetStream ISB's server, or "" for one at an address nothing listens on
// (a pipeline run in one process uses the memory ISB).
func sessionPipeline(t *testing.T, name, counter string, value int, natsURL string) string {
	t.Helper()
	window := "            session:\n              timeout: " + strconv.Itoa(sessionTimeout) + "ms\n"
	yaml := reducePipeline(name, window, cmpOr(counter, "COUNTER"), jetStreamISB(cmpOr(natsURL, "nats://127.0.0.1:9"), ""), "")
	repl := map[string]string{"          rpu: 20\n          duration: 100ms\n": "          rpu: 6\n          duration: 1s\n"}
	if counter == "" {
		repl["        container:\n          command: [\"COUNTER\"]\n"] = "        builtin:\n          name: count\n"
	}
	if value != 0 {
		blob := base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(value)))
		repl["          keyCount: 3\n"] = "          keyCount: 3\n          valueBlob: " + blob + "\n"
	}
	for old, s := range repl {
		if !strings.Contains(yaml, old) {
			t.Fatalf("the keyed pipeline has no %q", old)
		}
		yaml = strings.Replace(yaml, old, s, 1)
	}
	return yaml
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// checkSessions checks every result against the messages generated: the
// sessions of each key are its event times, in order, each one joining the
// session before when within timeout (ms) of its end; a session's result
// has the event time of its end less 1 ms and is per times the number of
// its messages. No key misses a session before its last result, and every
// key has at least minSessions.
func checkSessions(t *testing.T, raw, results []sinkLine, timeout int64, per, minSessions int) {
	t.Helper()
	times := map[string][]int64{}
	for _, m := range raw {
		times[m.keys] = append(times[m.keys], m.eventTime)
	}
	want := map[windowKey]int{}
	for key, ts := range times {
		slices.Sort(ts)
		end, n := int64(0), 0
		for i, et := range ts {
			if i > 0 && et > end {
				want[windowKey{key, end}] = n * per
				n = 0
			}
			if n == 0 || et+timeout > end {
				end = et + timeout
			}
			n++
		}
		want[windowKey{key, end}] = n * per
	}
	got := map[windowKey]int{}
	last := map[string]int64{}
	for _, r := range results {
		n, err := strconv.Atoi(r.payload)
		if err != nil {
			t.Fatalf("a result that is no number: %+v", r)
		}
		w := windowKey{r.keys, r.eventTime + 1}
		if prev, ok := got[w]; ok && prev != n {
			t.Errorf("session %v delivered twice with counts %d and %d", w, prev, n)
		}
		got[w] = n
		last[r.keys] = max(last[r.keys], w.end)
		if n != want[w] {
			t.Errorf("session ending %s of key %s: result %d, want %d", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, n, want[w])
		}
	}
	sessions := map[string]int{}
	for w := range want {
		if w.end <= last[w.key] {
			if _, ok := got[w]; !ok {
				t.Errorf("session ending %s of key %s (%d) has no result", time.UnixMilli(w.end).UTC().Format("15:04:05.000"), w.key, want[w])
			}
			sessions[w.key]++
		}
	}
	if len(sessions) != 3 {
		t.Errorf("results for keys %v; want 3 keys", sessions)
	}
	for k, n := range sessions {
		if n < minSessions {
			t.Errorf("key %s: %d sessions; want at least %d", k, n, minSessions)
		}
	}
	t.Logf("%d messages generated; %d results for %d sessions: %v", len(raw), len(results), len(got), sessions)
}

// TestSessionReduceInOneProcess runs the keyed count over session windows
// in one process, with sluice's session counter and with the built-in
// count: each burst of a key is one session, and each session's count is
// what was generated in it; and sluice's session sum, every payload 7,
// whose sums are 7 times that.
func TestSessionReduceInOneProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, counter string
		value         int
	}{
		{"sessioncounter", "sessioncounter", 0},
		{"builtin", "", 0},
		{"sessionsum", "sessionsum", 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			counter := ""
			if tt.counter != "" {
				counter = example(t, tt.counter)
			}
			cfg := writeConfig(t, sessionPipeline(t, "ses-"+tt.name, counter, tt.value, ""))
			p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
			p.waitFor(60*time.Second, "four sessions of each key", func() bool {
				_, res := nfgoSinkLines(p.lines)
				return enoughWindows(res, 4)
			})
			if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
			}
			raw, res := nfgoSinkLines(p.stdoutLines())
			checkSessions(t, raw, res, sessionTimeout, max(tt.value, 1), 4)
		})
	}
}

// TestSessionReduceNumaflowGo runs numaflow-go's session reduce examples,
// unchanged, as the session reduce container of the keyed pipeline, in one
// process with --spawn and no --uds-dir: each session's count is what was
// generated in it, and its sum, every payload 7, 7 times that. It is
// skipped without NUMAFLOW_GO_DIR, and when /var/run/numaflow cannot be
// had.
func TestSessionReduceNumaflowGo(t *testing.T) {
	src := os.Getenv(envNumaflowGo)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's session reduce example is not run (set it to a numaflow-go source tree)", envNumaflowGo)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		example string
		value   int
	}{{"sessionreducer/counter", 0}, {"sessionreducer/sum", 7}} {
		t.Run(tt.example, func(t *testing.T) {
			t.Parallel() // each container has a /var/run/numaflow of its own
			bin := numaflowGoExample(t, src, tt.example)
			raw, res, _ := runNumaflowGoPipeline(t, sessionPipeline(t, "ses-nfgo", bin, tt.value, ""), tt.example, false)
			checkSessions(t, raw, res, sessionTimeout, max(tt.value, 1), 4)
		})
	}
}

// TestSessionOnJetStreamKilled runs the keyed session count with every
// vertex its own process on JetStream, the count vertex as two replicas,
// one per partition, sharing a state directory. Right after a burst, while
// its sessions are open, replica 0 is killed with SIGKILL; a second later
// it is started again on the same state directory. Every session's count is
// what was generated in it, a session delivered twice has the same count,
// and each key has at least five sessions.
func TestSessionOnJetStreamKilled(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, natstest.Options{})
	state := t.TempDir()
	cfg := writeConfig(t, sessionPipeline(t, "ses-killed", example(t, "sessioncounter"), 0, nats.URL))
	countProc := func(replica int) *proc { return vertexProc(t, cfg, "count", replica, "--state-dir", state) }
	counts, raw := vertexProc(t, cfg, "counts", 0), vertexProc(t, cfg, "raw", 0)
	reducers := []*proc{countProc(0), countProc(1)}
	cat := vertexProc(t, cfg, "cat", 0)
	in := vertexProc(t, cfg, "in", 0)
	sessions := func(n int) func() bool {
		return func() bool {
			_, res := sinkLinesLocked(counts.lines)
			return enoughWindows(res, n)
		}
	}
	counts.waitFor(60*time.Second, "two sessions of each key", sessions(2))

	// Kill replica 0 half a timeout after the next burst reaches raw: the
	// burst's sessions are open in count, or its messages on their way.
	seen := len(raw.stdoutLines())
	raw.waitFor(30*time.Second, "the next burst", func() bool { return len(raw.lines) > seen })
	time.Sleep(sessionTimeout / 2 * time.Millisecond)
	_, before := sinkLines(t, counts.stdoutLines())
	killed := time.Now()
	reducers[0].stop(syscall.SIGKILL, 10*time.Second)
	time.Sleep(time.Second) // bursts come and sessions stay open while it is down
	reducers[0] = countProc(0)
	t.Logf("count-0 killed at %s with %d results out, started again", killed.UTC().Format("15:04:05.000"), len(before))

	counts.waitFor(60*time.Second, "five sessions of each key", sessions(5))
	if code, _ := in.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("in: exit code %d; stderr:\n%s", code, in.stderrText())
	}
	raw.waitQuiet() // raw gets what in wrote before it stopped
	for i, p := range append([]*proc{cat, counts, raw}, reducers...) {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("%s: exit code %d; stderr:\n%s", []string{"cat", "counts", "raw", "count-0", "count-1"}[i], code, p.stderrText())
		}
	}
	rawLines, _ := sinkLines(t, raw.stdoutLines())
	_, res := sinkLines(t, counts.stdoutLines())
	checkSessions(t, rawLines, res, sessionTimeout, 1, 5)
	// Event times are the generator's clock, this machine's: a message
	// within the timeout before the kill was in a session still open then.
	open := map[string]int{}
	for _, m := range rawLines {
		if at := killed.UnixMilli(); m.eventTime <= at && m.eventTime+sessionTimeout > at {
			open[m.keys]++
		}
	}
	if len(open) == 0 {
		t.Errorf("no session was open when count-0 was killed at %s", killed.UTC().Format("15:04:05.000"))
	}
	t.Logf("messages of sessions open at the kill: %v", open)
	if t.Failed() {
		t.Logf("count-0 stderr:\n%s", reducers[0].stderrText())
	}
}
