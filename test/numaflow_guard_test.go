package test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// numaflowGuardFires is Numaflow's rate-limit guard of a MonoVertex
// (pkg/reconciler/monovertex/scaling/scaling.go since Numaflow #2917): a
// scale-up is skipped when ceil(rate) reaches max × readBatchSize.
func numaflowGuardFires(rate float64, max, readBatchSize int64) bool {
	return math.Ceil(rate) >= float64(max*readBatchSize)
}

// daemonRate is the processing rate as Numaflow's MonoVertex daemon computes
// it from snapshots of monovtx_read_total taken every 5 s and stamped with
// whole Unix seconds: the counts' growth from the first snapshot to the last
// but one (the last may be incomplete), over the seconds between their
// stamps.
func daemonRate(stamps []int64, counts []float64) float64 {
	end := len(counts) - 2
	if end <= 0 || stamps[end] == stamps[0] {
		return -1
	}
	return (counts[end] - counts[0]) / float64(stamps[end]-stamps[0])
}

// TestNumaflowRateLimitGuard measures what Numaflow's own scaler does with
// sluice's limit: a generator → log MonoVertex limited to max = 100 messages
// a second runs at its limit for each of readBatchSize 1, 10 and 100;
// snapshots of its read counter (the counter monovtx_read_total exports)
// every 5 s for 30 s give the rate as Numaflow's daemon computes it, and
// Numaflow's guard is applied to it. sluice's limit counts messages, so the
// rate is max whatever the batch size, and the guard, which compares it with
// max × readBatchSize, cannot fire for a batch of more than one message.
func TestNumaflowRateLimitGuard(t *testing.T) {
	t.Parallel()
	const limit = 100
	var mu sync.Mutex
	var rows []string
	for _, rbs := range []int64{1, 10, 100} {
		t.Run(fmt.Sprint("readBatchSize-", rbs), func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: guard-%d
spec:
  limits:
    readBatchSize: %d
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    generator:
      rpu: 100000
  sink:
    log: {}
`, rbs, rbs, limit, limit))
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
			addr := p.metricsAddr()
			p.waitFor(20*time.Second, "the first messages", func() bool { return len(p.lines) > 0 })
			var stamps []int64
			var counts []float64
			for i := range 7 {
				if i > 0 {
					time.Sleep(5 * time.Second)
				}
				stamps = append(stamps, time.Now().Unix())
				counts = append(counts, metricSum(t, addr, "sluice_forward_read_total"))
			}
			if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
			}
			rate := daemonRate(stamps, counts)
			fires := numaflowGuardFires(rate, limit, rbs)
			mu.Lock()
			defer mu.Unlock()
			rows = append(rows, fmt.Sprintf("readBatchSize %3d: rate %.2f/s, max × readBatchSize %d, guard fires: %v",
				rbs, rate, limit*rbs, fires))
			if rate < 0.9*limit || rate > 1.1*limit {
				t.Errorf("rate %.2f/s at a limit of %d/s; want about the limit", rate, limit)
			}
			if rbs > 1 && fires {
				t.Errorf("the guard fires at %.2f/s against %d", rate, limit*rbs)
			}
		})
	}
	t.Cleanup(func() { t.Logf("Numaflow's guard on sluice's limit of %d/s:\n%s", limit, strings.Join(rows, "\n")) })
}
