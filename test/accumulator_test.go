package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// accumulatorPipeline is the YAML of a pipeline whose generator of three
// keys (in) writes to a log sink (raw) and to an accumulator vertex (sort)
// running sorter, whose output goes to a log sink (sorted). isb is the
// spec's isb block.
func accumulatorPipeline(name, sorter, isb string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  limits:
    readBatchSize: 50
    readTimeout: 100ms
  watermark:
    maxDelay: 0s
` + isb + `  vertices:
    - name: in
      source:
        generator:
          rpu: 10
          duration: 100ms
          keyCount: 3
    - name: raw
      sink:
        log: {}
    - name: sort
      udf:
        container:
          command: [` + strconv.Quote(sorter) + `]
        groupBy:
          keyed: true
          window:
            accumulator:
              timeout: 1s
          storage:
            persistentVolumeClaim:
              volumeSize: 1Gi
    - name: sorted
      sink:
        log: {}
  edges:
    - from: in
      to: raw
    - from: in
      to: sort
    - from: sort
      to: sorted
`
}

// sortedLines splits the log-sink lines of an accumulator pipeline whose
// function passes messages on unchanged: the first line of an ID is raw's,
// the second sorted's.
func sortedLines(lines []string) (raw, sorted []sinkLine) {
	seen := map[string]int{}
	for _, l := range lines {
		m := sinkLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		et, _ := strconv.ParseInt(m[3], 10, 64)
		s := sinkLine{payload: m[1], keys: m[2], eventTime: et, id: m[4]}
		if seen[s.id]++; seen[s.id] == 1 {
			raw = append(raw, s)
		} else {
			sorted = append(sorted, s)
		}
	}
	return raw, sorted
}

// checkSorted checks that sorted has each key's messages in event-time
// order, and every raw message up to the latest event time sorted reached.
func checkSortedOutput(t *testing.T, raw, sorted []sinkLine) {
	t.Helper()
	last := map[string]int64{}
	var reached int64
	got := map[string]bool{}
	for _, s := range sorted {
		if s.eventTime < last[s.keys] {
			t.Errorf("key %s: %s at %d after %d", s.keys, s.id, s.eventTime, last[s.keys])
		}
		last[s.keys] = s.eventTime
		reached = max(reached, s.eventTime)
		got[s.id] = true
	}
	lost := 0
	for _, r := range raw {
		if r.eventTime < reached && !got[r.id] {
			lost++
		}
	}
	if lost > 0 || len(sorted) == 0 {
		t.Errorf("%d of %d messages before %d lost; %d sorted", lost, len(raw), reached, len(sorted))
	}
}

// TestAccumulatorInOneProcess runs the stream sorter as an accumulator
// vertex under vertex run in one process: each key's messages come out in
// event-time order, and none is lost.
func TestAccumulatorInOneProcess(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, accumulatorPipeline("acc", example(t, "streamsorter"), jetStreamISB("nats://127.0.0.1:9", "")))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	p.waitFor(60*time.Second, "300 sorted messages", func() bool {
		_, s := sortedLines(p.lines)
		return len(s) >= 300
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	raw, sorted := sortedLines(p.stdoutLines())
	checkSortedOutput(t, raw, sorted)
	if strings.Contains(p.stderrText(), "panic") {
		t.Errorf("stderr:\n%s", p.stderrText())
	}
}

// TestAccumulatorNumaflowGo runs numaflow-go's examples/accumulator/
// streamsorter, unchanged, as the accumulator vertex, in one process with
// --spawn and no --uds-dir, so that it serves in /var/run/numaflow: each
// key's messages come out in event-time order and none is lost, the
// heartbeats letting it emit what it holds. It is skipped without
// NUMAFLOW_GO_DIR, and when /var/run/numaflow cannot be had.
func TestAccumulatorNumaflowGo(t *testing.T) {
	src := os.Getenv(envNumaflowGo)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's stream sorter is not run (set it to a numaflow-go source tree)", envNumaflowGo)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := numaflowGoExample(t, src, "accumulator/streamsorter")
	p := start(t, "run", "-f", writeConfig(t, accumulatorPipeline("acc-nfgo", bin, jetStreamISB("nats://127.0.0.1:9", ""))), "--spawn",
		"--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	numaflowGoStarted(t, p, "numaflow-go's stream sorter")
	p.waitFor(90*time.Second, "300 sorted messages", func() bool {
		_, s := sortedLines(p.lines)
		return len(s) >= 300
	})
	if code, _ := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	raw, sorted := sortedLines(p.stdoutLines())
	checkSortedOutput(t, raw, sorted)
}

// TestAccumulatorOnJetStreamKilled runs the stream sorter as an accumulator
// vertex with every vertex its own process on JetStream; the sort vertex is
// killed with SIGKILL once sorted messages come out, and started again on
// the same state directory, from which it recovers the messages of the key
// sets still open and not yet emitted; what it had read and not acked is
// delivered again after the ISB's ackWait (3s here, so that waiting for it
// is short). Each key's messages come out in event-time order, every
// message at or below the latest event time that came out of its key comes
// out, once (or twice if the restart counts it in doubt), and nothing
// comes out that was not generated.
func TestAccumulatorOnJetStreamKilled(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, natstest.Options{})
	state := t.TempDir()
	cfg := writeConfig(t, accumulatorPipeline("acc-killed", example(t, "streamsorter"), jetStreamISB(nats.URL, "      ackWait: 3s\n")))
	sortProc := func() *proc { return vertexProc(t, cfg, "sort", 0, "--state-dir", state) }
	sorted, raw := vertexProc(t, cfg, "sorted", 0), vertexProc(t, cfg, "raw", 0)
	sorter := sortProc()
	in := vertexProc(t, cfg, "in", 0)
	distinct := func() int {
		out, _ := sinkLinesLocked(sorted.lines)
		ids := map[string]bool{}
		for _, s := range out {
			ids[s.id] = true
		}
		return len(ids)
	}
	sorted.waitFor(90*time.Second, "100 sorted messages", func() bool { return distinct() >= 100 })
	sorter.stop(syscall.SIGKILL, 10*time.Second)
	sorted.mu.Lock()
	before := distinct()
	sorted.mu.Unlock()
	time.Sleep(time.Second) // key sets stay open while it is down
	sorter = sortProc()
	sorted.waitFor(90*time.Second, "200 sorted messages more after the restart", func() bool { return distinct() >= before+200 })
	if code, _ := in.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("in: exit code %d; stderr:\n%s", code, in.stderrText())
	}
	for _, p := range []*proc{sorter, sorted} {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	// raw gets what in wrote before it stopped: wait until it has every
	// message sorted has, then until it takes no more.
	rawLines := stopRaw(t, raw, sorted)
	sortedLines, _ := sinkLines(t, sorted.stdoutLines())
	dups, _ := checkExactlyOnce(t, rawLines, sortedLines, inDoubtOf(sorter))
	t.Logf("%d messages generated; %d sorted, %d of them again after the crash", len(rawLines), len(sortedLines)-dups, dups)
	if !strings.Contains(sorter.stderrText(), "windows recovered from the log") {
		t.Errorf("the restarted sort vertex recovered nothing from its state directory")
	}
	if t.Failed() {
		t.Logf("sort stderr:\n%s", sorter.stderrText())
	}
}

// recoveredRE and inDoubtRE find, in a restarted accumulator vertex's log,
// how many messages it brought back from its log, and how many of them
// were marked done without the mark being confirmed.
var (
	recoveredRE = regexp.MustCompile(`"msg":"windows recovered from the log".*"messages":(\d+)`)
	inDoubtRE   = regexp.MustCompile(`"msg":"accumulator outputs may be written again[^"]*".*"messages":(\d+)`)
)

// inDoubtOf returns how many messages the restarted accumulator vertex p
// counted in doubt.
func inDoubtOf(p *proc) int {
	n := 0
	if m := inDoubtRE.FindStringSubmatch(p.stderrText()); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	return n
}

// TestAccumulatorKilledThrice runs the stream sorter as an accumulator
// vertex on JetStream for two minutes, every vertex its own process, and
// kills the sort vertex with SIGKILL three times, 30s apart, starting it
// again a second later on the same state directory. The buffers keep a
// duplicate window of 1s, shorter than a restart, so a message the vertex
// wrote again would reach the sink twice. Each key is always active, so its
// key set never closes: the restarts feed only what was not yet emitted,
// and each message comes out exactly once, each key's in event-time order.
// Only a message whose done mark a kill left unconfirmed (its output
// written, the confirmation not) may come out twice; the restarted vertex
// counts those in its log, and the test allows that many copies.
func TestAccumulatorKilledThrice(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, natstest.Options{})
	state := t.TempDir()
	cfg := writeConfig(t, accumulatorPipeline("acc-thrice", example(t, "streamsorter"),
		jetStreamISB(nats.URL, "      ackWait: 3s\n      duplicates: 1s\n")))
	sortProc := func() *proc { return vertexProc(t, cfg, "sort", 0, "--state-dir", state) }
	sorted, raw := vertexProc(t, cfg, "sorted", 0), vertexProc(t, cfg, "raw", 0)
	sorters := []*proc{sortProc()}
	in := vertexProc(t, cfg, "in", 0)
	begin := time.Now()
	distinct := func() int {
		out, _ := sinkLinesLocked(sorted.lines)
		ids := map[string]bool{}
		for _, s := range out {
			ids[s.id] = true
		}
		return len(ids)
	}
	sorted.waitFor(60*time.Second, "50 sorted messages", func() bool { return distinct() >= 50 })
	for k := 1; k <= 3; k++ {
		time.Sleep(time.Until(begin.Add(time.Duration(k) * 30 * time.Second)))
		sorters[len(sorters)-1].stop(syscall.SIGKILL, 10*time.Second)
		sorted.mu.Lock()
		before := distinct()
		sorted.mu.Unlock()
		time.Sleep(time.Second)
		sorters = append(sorters, sortProc())
		sorted.waitFor(40*time.Second, fmt.Sprintf("100 sorted messages more after restart %d", k),
			func() bool { return distinct() >= before+100 })
	}
	time.Sleep(time.Until(begin.Add(120 * time.Second)))
	if code, _ := in.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("in: exit code %d; stderr:\n%s", code, in.stderrText())
	}
	sorted.waitQuiet()
	for _, p := range []*proc{sorters[len(sorters)-1], sorted} {
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
		}
	}
	rawLines := stopRaw(t, raw, sorted)

	inDoubt := 0
	var replayed []int
	for i, p := range sorters[1:] {
		m := recoveredRE.FindStringSubmatch(p.stderrText())
		if m == nil {
			t.Errorf("restart %d recovered nothing from its state directory", i+1)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		replayed = append(replayed, n)
		inDoubt += inDoubtOf(p)
	}
	out, _ := sinkLines(t, sorted.stdoutLines())
	dups, lost := checkExactlyOnce(t, rawLines, out, inDoubt)
	t.Logf("%d generated, %d sorted; %d copies, %d lost, %d in doubt; replayed at the restarts: %v",
		len(rawLines), len(out)-dups, dups, lost, inDoubt, replayed)
	if t.Failed() {
		for i, p := range sorters {
			t.Logf("sort %d stderr:\n%s", i, p.stderrText())
		}
	}
}

// checkExactlyOnce checks sorted against raw: each key's messages in
// event-time order (later copies left out), every raw message at or below
// the latest event time of its key in sorted there, nothing there that
// was not generated, and no more copies than allowed. It returns the
// copies and the messages lost.
func checkExactlyOnce(t *testing.T, raw, sorted []sinkLine, allowed int) (dups, lost int) {
	t.Helper()
	last := map[string]int64{}
	got := map[string]bool{}
	for _, s := range sorted {
		if got[s.id] {
			dups++
			continue
		}
		got[s.id] = true
		if prev, ok := last[s.keys]; ok && s.eventTime < prev {
			t.Errorf("key %s: %s at %d after %d", s.keys, s.id, s.eventTime, prev)
		}
		last[s.keys] = max(last[s.keys], s.eventTime)
	}
	generated := map[string]bool{}
	for _, r := range raw {
		generated[r.id] = true
	}
	for id := range got {
		if !generated[id] {
			t.Errorf("%s came out and was never generated", id)
		}
	}
	for _, r := range raw {
		if reached, ok := last[r.keys]; ok && r.eventTime <= reached && !got[r.id] {
			if lost++; lost <= 10 {
				t.Errorf("key %s: %s at %d (at or below %d) never came out", r.keys, r.id, r.eventTime, reached)
			}
		}
	}
	if lost > 0 || len(last) != 3 {
		t.Errorf("%d of %d messages lost; %d sorted for %d keys", lost, len(raw), len(got), len(last))
	}
	if dups > allowed {
		t.Errorf("%d messages came out twice; %d were in doubt after the kills", dups, allowed)
	}
	return dups, lost
}

// stopRaw stops raw, the sink of what in wrote, once it has every message
// sorted has and takes no more, and returns its lines.
func stopRaw(t *testing.T, raw, sorted *proc) []sinkLine {
	t.Helper()
	out, _ := sinkLines(t, sorted.stdoutLines())
	raw.waitFor(30*time.Second, "every sorted message in raw", func() bool {
		got, _ := sinkLinesLocked(raw.lines)
		ids := map[string]bool{}
		for _, r := range got {
			ids[r.id] = true
		}
		for _, s := range out {
			if !ids[s.id] {
				return false
			}
		}
		return true
	})
	raw.waitQuiet()
	if code, _ := raw.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("raw: exit code %d; stderr:\n%s", code, raw.stderrText())
	}
	rawLines, _ := sinkLines(t, raw.stdoutLines())
	return rawLines
}
