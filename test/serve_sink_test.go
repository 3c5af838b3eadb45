package test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bodies is an HTTP endpoint that counts each body it is sent.
type bodies struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.n[string(body)]++
	b.mu.Unlock()
}

func (b *bodies) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.n)
}

// TestServeSinkUnderRun: `vertex serve --role sink` is the udsink of a
// `vertex run` MonoVertex, as it is a Numaflow vertex's: the generator's
// messages reach the served sink's HTTP endpoint under the served limit
// (never more than max in a second), and both processes stop on SIGTERM
// with exit code 0.
func TestServeSinkUnderRun(t *testing.T) {
	const max = 100
	ep := &bodies{n: map[string]int{}}
	var mu sync.Mutex
	perSecond := map[int64]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perSecond[time.Now().Unix()]++
		mu.Unlock()
		ep.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := udsDir(t)
	served := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: served-sink
spec:
  limits:
    readTimeout: 100ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    generator: {}
  sink:
    http:
      url: %s/ingest
`, max, max, srv.URL))
	sink := start(t, "serve", "--role", "sink", "-f", served, "--uds-dir", dir, "--addr", "127.0.0.1:0")
	addr := sink.metricsAddr()
	run := start(t, "run", "-f", writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
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
`+udContainer("      ", "", nil)), "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
	run.metricsAddr()
	if !waitUntil(30*time.Second, func() bool { return ep.count() >= 350 }) {
		t.Fatalf("%d messages at the endpoint in 30s; served sink stderr:\n%s\nrun stderr:\n%s", ep.count(), sink.stderrText(), run.stderrText())
	}
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Errorf("served sink /readyz = %d %s", code, body)
	}
	_, metrics := httpGet(t, "http://"+addr+"/metrics")
	if code, _ := run.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("vertex run exit %d; stderr:\n%s", code, run.stderrText())
	}
	if code, _ := sink.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("vertex serve exit %d; stderr:\n%s", code, sink.stderrText())
	}
	if !strings.Contains(string(metrics), "sluice_ratelimit_max_tokens") {
		t.Error("no sluice_ratelimit_max_tokens on the served sink's /metrics")
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
	ep.mu.Lock()
	defer ep.mu.Unlock()
	dups := 0
	for _, n := range ep.n {
		if n > 1 {
			dups++
		}
	}
	t.Logf("messages per second at the endpoint: %s; %d distinct, %d written more than once", strings.Join(counts, " "), len(ep.n), dups)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestServeSinkBadInput: a vertex with no sink is exit code 2 and one line
// naming the field.
func TestServeSinkBadInput(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  vertices:
    - name: in
      source:
        generator: {}
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: out
`)
	cmd := exec.Command(vertexBin, "serve", "--role", "sink", "-f", cfg, "--vertex", "in", "--uds-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "spec.vertices[0].sink") {
		t.Fatalf("exit %d (%v); output:\n%s\nwant exit 2 naming spec.vertices[0].sink", code, err, out)
	}
}

// waitUntil polls cond every 20ms for at most timeout.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
