package test

import (
	"maps"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestStreamingMonoVertex runs a streaming MonoVertex through vertex run
// --spawn: a source of 2,000 numbered messages, a map that takes 50ms a
// message (slowcat) and a sink that prints them, reading batches of 20 with
// up to 200 in flight, throttled at 500 a second. One batch at a time it
// could not pass 400 a second; streaming, the map holds up to 200 messages at
// once over several streams, most epochs but the first and last grant the
// whole 500 and none more, and every message reaches the sink exactly once.
func TestStreamingMonoVertex(t *testing.T) {
	t.Parallel()
	const count, maxRate = 2000, 500
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: streaming
spec:
  streaming: true
  limits:
    readBatchSize: 20
    concurrency: 200
    readTimeout: 200ms
    rateLimit:
      max: `+strconv.Itoa(maxRate)+`
      min: `+strconv.Itoa(maxRate)+`
      rampUpDuration: 0s
  source:
    udsource:
`+udContainer("      ", example(t, "simplesource"), map[string]string{"SIMPLESOURCE_COUNT": strconv.Itoa(count)})+`  udf:
`+udContainer("    ", example(t, "slowcat"), map[string]string{"SLOWCAT_DELAY": "50ms"})+`  sink:
    udsink:
`+udContainer("      ", example(t, "logsink"), nil))
	p := start(t, "run", "-f", cfg, "--spawn", "--uds-dir", udsDir(t), "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	p.metricsAddr()
	p.waitFor(60*time.Second, "every message at the sink", func() bool { return len(p.lines) >= count })
	code, _ := p.stop(syscall.SIGTERM, 20*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	seen := sinkNumbers(t, p.stdoutLines())
	for n := range count {
		if seen[n] != 1 {
			t.Errorf("message %d reached the sink %d times; want once", n, seen[n])
		}
	}
	if len(p.stdoutLines()) != count {
		t.Errorf("the sink got %d messages; want %d", len(p.stdoutLines()), count)
	}
	var granted []int64
	epochs := p.epochs(t)
	for _, e := range slices.Sorted(maps.Keys(epochs)) {
		if g := epochs[e].Granted; g > 0 {
			granted = append(granted, g)
		}
	}
	t.Logf("granted per epoch: %v", granted)
	whole := 0
	for i, g := range granted {
		if g > maxRate {
			t.Errorf("epoch %d granted %d; max is %d", i, g, maxRate)
		}
		if i > 0 && i < len(granted)-1 && g == maxRate {
			whole++
		}
	}
	// One epoch at the whole 500 is what one batch at a time cannot
	// reach; most of them do, all but those in which the machine did not
	// run the vertex or its functions for a while.
	if interior := len(granted) - 2; whole < 1 || whole*2 < interior {
		t.Errorf("%d of %d epochs between the first and the last granted the whole %d; want most, which one batch at a time cannot reach", whole, interior, maxRate)
	}
}
