package test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// capped is an HTTP endpoint that accepts at most c requests in each second
// of the wall clock and answers the rest 429 with Retry-After: 1, as an API
// with a quota does.
type capped struct {
	c int

	mu                 sync.Mutex
	accepted, rejected map[int64]int // per Unix second
}

func newCapped(c int) *capped {
	return &capped{c: c, accepted: map[int64]int{}, rejected: map[int64]int{}}
}

func (e *capped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s := time.Now().Unix()
	e.mu.Lock()
	over := e.accepted[s] >= e.c
	if over {
		e.rejected[s]++
	} else {
		e.accepted[s]++
	}
	e.mu.Unlock()
	if over {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// window sums what the endpoint accepted and rejected in the seconds [from,
// to), and lists them as accepted/rejected per second.
func (e *capped) window(from, to int64) (accepted, rejected int, seconds []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return tallyPerSecond(e.accepted, e.rejected, from, to)
}

// tallyPerSecond sums what an endpoint accepted and turned away in the seconds
// [from, to), counted per Unix second, and lists them as accepted/turned
// away per second.
func tallyPerSecond(accepted, turned map[int64]int, from, to int64) (a, r int, seconds []string) {
	for s := from; s < to; s++ {
		a += accepted[s]
		r += turned[s]
		seconds = append(seconds, fmt.Sprintf("%d/%d", accepted[s], turned[s]))
	}
	return a, r, seconds
}

// adaptiveVertexYAML is a MonoVertex that calls url at most max a second,
// ramping from 10 over 20s, its replicas sharing the limit through the Redis
// at redisAddr, with the adaptive block given (or none).
func adaptiveVertexYAML(name string, max int, redisAddr, adaptive, url string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: 10
      rampUpDuration: 20s
      store:
        redisStore:
          mode: single
          url: redis://%s
%s  source:
    generator:
      rpu: 1000
  sink:
    http:
      url: %s/api
      concurrency: 20
`, name, max, redisAddr, adaptive, url)
}

// TestAdaptiveFindsTheEndpointsCapacity runs two MonoVertices of 3 replicas
// each, side by side, against two endpoints that accept at most C = 50
// requests a second and answer the rest 429 with Retry-After: 1. Both may
// send 4·C a second, shared through Redis and reached over a 20s ramp. With
// rateLimit.adaptive on (a cut of 20%), from 10s on the endpoint accepts at
// least 80% of C and rejects at most 10% of what it receives; with it off,
// the rejected share is what the ramp to 4·C makes it.
func TestAdaptiveFindsTheEndpointsCapacity(t *testing.T) {
	t.Parallel()
	const c, replicas = 50, 3
	const warmUp, measured = 10, 12 // seconds
	srv := redistest.Start(t, redistest.Options{})
	on, off := newCapped(c), newCapped(c)
	onSrv, offSrv := httptest.NewServer(on), httptest.NewServer(off)
	defer onSrv.Close()
	defer offSrv.Close()
	onCfg := writeConfig(t, adaptiveVertexYAML("adaptive-on", 4*c, srv.Addr,
		"      adaptive:\n        cutPercentage: 20\n", onSrv.URL))
	offCfg := writeConfig(t, adaptiveVertexYAML("adaptive-off", 4*c, srv.Addr, "", offSrv.URL))

	var onProcs, offProcs []*proc
	for i := range replicas {
		r := strconv.Itoa(i)
		onProcs = append(onProcs, start(t, "run", "-f", onCfg, "--metrics-addr", "127.0.0.1:0", "--replica", r))
		offProcs = append(offProcs, start(t, "run", "-f", offCfg, "--metrics-addr", "127.0.0.1:0", "--replica", r))
	}
	for _, p := range append(onProcs, offProcs...) {
		p.metricsAddr()
	}
	first := time.Now().Unix() + 1 + warmUp // the first whole second measured
	end := first + measured
	time.Sleep(time.Until(time.Unix(end, 0).Add(100 * time.Millisecond))) // real endpoints, real time

	cuts := 0.0
	for _, p := range onProcs {
		for _, v := range metricValues(t, p.metricsAddr(), "sluice_ratelimit_cuts_total") {
			cuts += v
		}
	}
	for _, p := range append(onProcs, offProcs...) {
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	}

	acc, rej, seconds := on.window(first, end)
	offAcc, offRej, offSeconds := off.window(first, end)
	rate := float64(acc) / measured
	share := float64(rej) / float64(max(acc+rej, 1))
	offShare := float64(offRej) / float64(max(offAcc+offRej, 1))
	t.Logf("adaptive on:  accepted %.1f/s (%.0f%% of C = %d), rejected %.1f%% of requests, %v cuts over the replicas; accepted/rejected per second: %s",
		rate, 100*rate/c, c, 100*share, cuts, strings.Join(seconds, " "))
	t.Logf("adaptive off: accepted %.1f/s, rejected %.1f%% of requests; accepted/rejected per second: %s",
		float64(offAcc)/measured, 100*offShare, strings.Join(offSeconds, " "))
	if rate < 0.8*c {
		t.Errorf("with adaptive on, the endpoint accepted %.1f a second; want at least 80%% of %d", rate, c)
	}
	if share > 0.10 {
		t.Errorf("with adaptive on, %.1f%% of the requests were rejected; want at most 10%%", 100*share)
	}
	if cuts == 0 {
		t.Error("sluice_ratelimit_cuts_total is 0 on every replica with adaptive on")
	}
	if offShare <= share {
		t.Errorf("with adaptive off, %.1f%% of the requests were rejected, no more than the %.1f%% with it on", 100*offShare, 100*share)
	}
}
