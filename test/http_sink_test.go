package test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// endpoint is an HTTP server that records when each request arrived and
// answers one of them, the first after throttleAfter, 429 with Retry-After.
type endpoint struct {
	throttleAfter time.Duration
	retryAfter    string

	mu        sync.Mutex
	arrivals  []time.Time
	bodies    map[string]int
	throttled time.Time // when the 429 was answered
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.arrivals = append(e.arrivals, now)
	if e.throttled.IsZero() && now.Sub(e.arrivals[0]) >= e.throttleAfter {
		e.throttled = now
		w.Header().Set("Retry-After", e.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	e.bodies[string(body)]++
	w.WriteHeader(http.StatusNoContent)
}

// TestHTTPSinkLimitAndRetryAfter runs generator → http sink at 40 messages a
// second against an endpoint that answers one request, 3s in, 429 with
// Retry-After: 2. The endpoint never sees more than 40 requests in a second,
// sees none in the 2s after the 429, and gets every message the vertex read.
func TestHTTPSinkLimitAndRetryAfter(t *testing.T) {
	t.Parallel()
	const max = 40
	ep := &endpoint{throttleAfter: 3 * time.Second, retryAfter: "2", bodies: map[string]int{}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: to-api
spec:
  limits:
    readBatchSize: 20
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000
  sink:
    http:
      url: %s/ingest
      concurrency: 1
`, max, max, srv.URL))
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
	addr := p.metricsAddr()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ep.mu.Lock()
		done := !ep.throttled.IsZero() && time.Since(ep.throttled) > 5*time.Second
		ep.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 429 answered 5s ago within 30s; stderr:\n%s", p.stderrText())
		}
		time.Sleep(100 * time.Millisecond) // real time: the endpoint is real
	}
	_, metrics := httpGet(t, "http://"+addr+"/metrics")
	if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}

	ep.mu.Lock()
	defer ep.mu.Unlock()
	perSecond := map[int64]int{}
	var gap time.Duration
	for _, a := range ep.arrivals {
		perSecond[a.Unix()]++
		if a.After(ep.throttled) && gap == 0 {
			gap = a.Sub(ep.throttled)
		}
	}
	var counts []string
	for s := ep.arrivals[0].Unix(); s <= ep.arrivals[len(ep.arrivals)-1].Unix(); s++ {
		counts = append(counts, fmt.Sprint(perSecond[s]))
		if perSecond[s] > max {
			t.Errorf("second %d: the endpoint saw %d requests; max %d", s, perSecond[s], max)
		}
	}
	if gap < 2*time.Second {
		t.Errorf("a request came %v after the 429 with Retry-After: 2", gap)
	}
	for body, n := range ep.bodies {
		if n > 1 {
			t.Errorf("message %q accepted %d times", body, n)
		}
	}
	if !strings.Contains(string(metrics), `sluice_ratelimit_throttled_seconds_total{reason="downstream_throttled"`) {
		t.Errorf("no downstream_throttled seconds in the metrics")
	}
	t.Logf("requests per second: %s; first request %v after the 429", strings.Join(counts, " "), gap.Round(time.Millisecond))
}
