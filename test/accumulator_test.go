package test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// accumulatorPipeline is the YAML of a pipeline whose generator of three
// keys (in) writes to a log sink (raw) and to an accumulator vertex (sort)
// running sorter, whose output goes to a log sink (sorted).
func accumulatorPipeline(name, sorter string) string {
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
` + jetStreamISB("nats://127.0.0.1:9", "") + `  vertices:
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
	cfg := writeConfig(t, accumulatorPipeline("acc", example(t, "streamsorter")))
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
	p := start(t, "run", "-f", writeConfig(t, accumulatorPipeline("acc-nfgo", bin)), "--spawn",
		"--metrics-addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	p.waitFor(20*time.Second, "the spawned containers' socket directory", func() bool {
		return strings.Contains(p.stderr.String(), "spawned containers' socket directory") ||
			strings.Contains(p.stderr.String(), "spawned containers' sockets")
	})
	if strings.Contains(p.stderrText(), "not using /var/run/numaflow") {
		t.Skipf("/var/run/numaflow is not to be had, so numaflow-go's stream sorter cannot serve:\n%s", p.stderrText())
	}
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
