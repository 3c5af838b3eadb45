package test

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// TestShadowModeThroughRedis runs three replicas sharing a limit of 300 a
// second through Redis with rateLimit.shadow, each reading a generator of
// 200 a second: nothing waits, so every epoch reads all 600, while the
// replicas' grants stay within 300, and the would-throttle count they report
// is within 1% of the true excess, the 300 an epoch the generators make
// beyond the limit.
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
	time.Sleep(7 * time.Second) // real replicas, real time
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
	var full int
	var reported, excess int64
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		if granted[e] > max {
			t.Errorf("epoch %d granted %d; max %d", e, granted[e], max)
		}
		t.Logf("epoch %d: read %d, granted %d, shadow-throttled %d, %d eligible", e, read[e], granted[e], shadow[e], eligible[e])
		if eligible[e] != replicas || read[e] < replicas*perReplica {
			continue // joining or leaving
		}
		full++
		reported += shadow[e]
		excess += replicas*perReplica - max // what the generators made beyond the limit
	}
	if full < 4 {
		t.Fatalf("%d epochs with every replica reading in full; want at least 4", full)
	}
	if diff := reported - excess; diff*100 > excess || -diff*100 > excess {
		t.Fatalf("over %d full epochs the replicas reported %d would-throttle; the true excess is %d", full, reported, excess)
	}
}
