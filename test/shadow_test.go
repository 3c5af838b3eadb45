package test

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// TestShadowModeThroughRedis runs three replicas sharing a limit of 300 a
// second through Redis with rateLimit.shadow, each reading a generator of
// 200 a second: nothing waits, so every epoch reads all 600, while the
// replicas' grants stay within 300, and the would-throttle count they report
// is within 1% of the true excess, what they read beyond the limit (the 300
// an epoch the generators make beyond it).
func TestShadowModeThroughRedis(t *testing.T) {
	t.Parallel()
	const max, perReplica, replicas = 300, 200, 3
	srv := redistest.Start(t, redistest.Options{})
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: shadow
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
      shadow: true
      store:
        redisStore:
          mode: single
          url: redis://%s
  source:
    generator:
      rpu: %d
      duration: 1s
  sink:
    blackhole: {}
`, max, max, srv.Addr, perReplica))
	procs, addrs := startReplicas(t, cfg, replicas)
	// full are the epochs in which every replica took part and read all
	// its generator made: the checks are of them.
	full := func() []int64 {
		var out []int64
		r := readEpochs(t, procs, replicas)
		reads := map[int64]int64{}
		for _, p := range procs {
			for e, l := range p.epochs(t) {
				reads[e] += l.Read
			}
		}
		for _, e := range r.full(replicas, 0, forever) {
			if reads[e] >= replicas*perReplica {
				out = append(out, e)
			}
		}
		return out
	}
	runtest.WaitFor(t, "4 epochs with every replica reading in full", func() bool { return len(full()) >= 4 }, untilEpochs...)
	var rateLimited float64
	for _, a := range addrs {
		rateLimited += metricValues(t, a, "sluice_ratelimit_throttled_seconds_total")["rate_limited"]
	}
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	if rateLimited != 0 {
		t.Errorf("the replicas waited %vs for the limiter; in shadow they never wait", rateLimited)
	}
	granted, shadow, read, eligible := map[int64]int64{}, map[int64]int64{}, map[int64]int64{}, map[int64]int{}
	for _, p := range procs {
		for e, l := range p.epochs(t) {
			granted[e] += l.Granted
			shadow[e] += l.ShadowThrottled
			read[e] += l.Read
			if l.Eligible {
				eligible[e]++
			}
		}
	}
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		if granted[e] > max {
			t.Errorf("epoch %d granted %d; max %d", e, granted[e], max)
		}
		t.Logf("epoch %d: read %d, granted %d, shadow-throttled %d, %d eligible", e, read[e], granted[e], shadow[e], eligible[e])
	}
	epochs := full()
	if len(epochs) < 4 {
		t.Fatalf("%d epochs with every replica reading in full; want at least 4", len(epochs))
	}
	var reported, excess int64
	for _, e := range epochs {
		reported += shadow[e]
		// What was read beyond the limit: the generators' 300 an epoch, and
		// what a generator late by a tick on a busy machine makes up.
		excess += read[e] - max
	}
	if diff := reported - excess; diff*100 > excess || -diff*100 > excess {
		t.Fatalf("over %d full epochs the replicas reported %d would-throttle; the true excess is %d", len(epochs), reported, excess)
	}
}
