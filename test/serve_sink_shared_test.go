package test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
)

// TestServeSinkThreeProcessesShareTheLimit: three `vertex serve --role sink`
// processes share one limit of 300/s through a real Redis, each the udsink of
// its own `vertex run` MonoVertex. The shared HTTP endpoint never sees more
// than 300 messages in a wall second, and the middle seconds carry at least
// 90% of 300/s.
func TestServeSinkThreeProcessesShareTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	const max = 300
	rs := redistest.Start(t, redistest.Options{})
	var mu sync.Mutex
	perSecond := map[int64]int{}
	total := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perSecond[time.Now().Unix()]++
		total++
		mu.Unlock()
	}))
	defer srv.Close()
	served := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: shared-sink
spec:
  limits:
    readTimeout: 100ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
  source:
    generator: {}
  sink:
    http:
      url: %s/ingest
`, max, max, rs.Addr, srv.URL))
	client := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: outer
spec:
  limits:
    readBatchSize: 50
    readTimeout: 100ms
  source:
    generator:
      rpu: 1000
  sink:
    udsink:
`+udContainer("      ", "", nil))
	var sinks, runs []*proc
	for range 3 {
		dir := udsDir(t)
		s := start(t, "serve", "--role", "sink", "-f", served, "--uds-dir", dir, "--addr", "127.0.0.1:0")
		s.metricsAddr()
		sinks = append(sinks, s)
		r := start(t, "run", "-f", client, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
		r.metricsAddr()
		runs = append(runs, r)
	}
	stderr := func() string {
		var b strings.Builder
		for i := range sinks {
			fmt.Fprintf(&b, "served sink %d:\n%s\nrun %d:\n%s\n", i, sinks[i].stderrText(), i, runs[i].stderrText())
		}
		return b.String()
	}
	// Run for 7 full seconds after the first arrival.
	if !waitUntil(30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return total > 0 }) {
		t.Fatalf("nothing at the endpoint in 30s; stderr:\n%s", stderr())
	}
	time.Sleep(7 * time.Second)
	for i, r := range runs {
		if code, _ := r.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("vertex run %d exit %d; stderr:\n%s", i, code, stderr())
		}
	}
	for i, s := range sinks {
		if code, _ := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("vertex serve %d exit %d; stderr:\n%s", i, code, stderr())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var first, last int64
	for s := range perSecond {
		if first == 0 || s < first {
			first = s
		}
		last = max64(last, s)
	}
	var counts []string
	for s := first; s <= last; s++ {
		counts = append(counts, fmt.Sprint(perSecond[s]))
		if perSecond[s] > max {
			t.Errorf("second %d: %d messages at the endpoint; max %d", s, perSecond[s], max)
		}
	}
	t.Logf("messages per second at the endpoint over 3 served sinks: %s", strings.Join(counts, " "))
	// The middle seconds: all but the first two and the last two.
	if last-first < 5 {
		t.Fatalf("arrivals over %d seconds only; want 6 or more", last-first+1)
	}
	mid := 0
	for s := first + 2; s <= last-2; s++ {
		mid += perSecond[s]
	}
	want := int(0.9 * float64(max) * float64(last-first-3))
	if mid < want {
		t.Errorf("middle %d seconds carry %d messages; want ≥ %d (90%% of %d/s)", last-first-3, mid, want, max)
	}
}
