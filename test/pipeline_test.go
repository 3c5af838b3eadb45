package test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// evenOddPipeline is the YAML of a pipeline: a simplesource of count numbered
// messages, the evenodd map, which tags each by parity, and two log sinks, even
// and odd, on edges with tag conditions. udfLimits is added to the evenodd
// vertex (indented by 6), isb to spec.
func evenOddPipeline(t *testing.T, name string, count int, udfLimits, isb string, sourceEnv map[string]string) string {
	env := map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)}
	for k, v := range sourceEnv {
		env[k] = v
	}
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
  limits:
    readBatchSize: 100
    readTimeout: 200ms
` + isb + `  vertices:
    - name: in
      source:
        udsource:
` + udContainer("          ", example(t, "simplesource"), env) + `    - name: evenodd
      udf:
` + udContainer("        ", example(t, "evenodd"), nil) + udfLimits + `    - name: even
      sink:
        log: {}
    - name: odd
      sink:
        log: {}
  edges:
    - from: in
      to: evenodd
    - from: evenodd
      to: even
      conditions:
        tags:
          values: [even-tag]
    - from: evenodd
      to: odd
      conditions:
        tags:
          operator: or
          values: [odd-tag]
`
}

// logValues parses log-sink lines of integer payloads, checking that each
// carries the key of its parity, and counts each value.
func logValues(t *testing.T, lines []string) map[int]int {
	t.Helper()
	seen := map[int]int{}
	for _, l := range lines {
		payload, rest, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		n, err := strconv.Atoi(payload)
		if !ok || err != nil {
			t.Fatalf("not a log-sink line of a number: %q", l)
		}
		key, _, _ := strings.Cut(rest, " ")
		if want := []string{"even", "odd"}[n%2]; key != want {
			t.Fatalf("message %d has key %q; want %q", n, key, want)
		}
		seen[n]++
	}
	return seen
}

// metricValues returns the values of a counter per vertex label from /metrics.
func metricValues(t *testing.T, addr, name string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*vertex="([^"]+)"[^}]*\} (\S+)$`)
	out := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] += v
	}
	return out
}

// TestPipelineInOneProcess runs the even/odd pipeline in one process on the
// memory ISB, its user-defined containers spawned: every message reaches the
// sink of its parity exactly once, and SIGTERM stops it cleanly.
func TestPipelineInOneProcess(t *testing.T) {
	t.Parallel()
	const count = 1000
	cfg := writeConfig(t, evenOddPipeline(t, "local", count, "", "", nil))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	p.waitFor(60*time.Second, "every message at a sink", func() bool { return len(p.lines) >= count })
	written := metricValues(t, addr, "sluice_forward_write_total")
	code, _ := p.stop(syscall.SIGTERM, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := logValues(t, p.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached a sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != count {
		t.Errorf("%d lines at the sinks; want %d", len(p.stdoutLines()), count)
	}
	want := fmt.Sprint(map[string]float64{"in": count, "evenodd": count, "even": count / 2, "odd": count / 2})
	if fmt.Sprint(written) != want {
		t.Errorf("written per vertex = %v; want %v", written, want)
	}
}
