package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/sinkclient"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// endpoint is a real HTTP downstream that records when each body came,
// answering status(body) (200 when nil).
type endpoint struct {
	mu       sync.Mutex
	arrivals []time.Time
	bodies   map[string]int
	status   func(body string) int
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	code := http.StatusOK
	if e.status != nil {
		code = e.status(string(b))
	}
	e.mu.Lock()
	if code == http.StatusOK {
		e.arrivals = append(e.arrivals, time.Now())
		e.bodies[string(b)]++
	}
	e.mu.Unlock()
	w.WriteHeader(code)
}

func (e *endpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.arrivals)
}

func sinkYAML(url, limits string) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: served
spec:
%s  source:
    generator: {}
  sink:
    http:
      url: %s
`, limits, url)
}

// startSink runs the sink role on yaml in a temp socket dir until the test
// ends; it returns the dir and the role's result.
func startSink(t *testing.T, yaml string) (string, chan error) {
	return startReplica(t, yaml, 0)
}

func startReplica(t *testing.T, yaml string, rep int) (string, chan error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runSinkReplica(ctx, Options{File: f, Path: path, SocketDir: dir, Log: zap.NewNop()}, rep)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sink role: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("sink role did not stop")
		}
	})
	return dir, done
}

func connect(t testing.TB, dir string) *sinkclient.Client {
	t.Helper()
	c := sinkclient.New(dir, udf.KindSink, zap.NewNop())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func batch(prefix string, n int) []isb.Message {
	msgs := make([]isb.Message, n)
	for i := range msgs {
		msgs[i] = isb.Message{ID: fmt.Sprintf("%s-%d", prefix, i), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return msgs
}

// TestSinkServesWrites: sluice's sink client, as Numaflow's runtime, writes
// a batch through the served sink to a real HTTP endpoint; every message
// is written once and answered success.
func TestSinkServesWrites(t *testing.T) {
	ep := &endpoint{bodies: map[string]int{}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	dir, _ := startSink(t, sinkYAML(srv.URL, ""))
	c := connect(t, dir)
	msgs := batch("a", 50)
	errs := make([]error, len(msgs))
	if err := c.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	if n := ep.count(); n != len(msgs) {
		t.Fatalf("endpoint got %d messages; want %d", n, len(msgs))
	}
	for b, n := range ep.bodies {
		if n != 1 {
			t.Errorf("%q written %d times", b, n)
		}
	}
}

// TestSinkFallbackAnswer: a message the downstream rejects for good goes to
// the vertex's fallback, which the role answers FALLBACK, for Numaflow's
// runtime to write to its own fallback sink.
func TestSinkFallbackAnswer(t *testing.T) {
	ep := &endpoint{bodies: map[string]int{}, status: func(b string) int {
		if strings.HasSuffix(b, "-3") {
			return http.StatusBadRequest
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	yaml := sinkYAML(srv.URL, "") + `    retryStrategy:
      backoff:
        steps: 1
        interval: 1ms
      onFailure: fallback
    fallback:
      log: {}
`
	dir, _ := startSink(t, yaml)
	c := connect(t, dir)
	msgs := batch("f", 5)
	errs := make([]error, len(msgs))
	if err := c.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		want := i == 3
		if got := err != nil && isFallback(err); got != want {
			t.Errorf("message %d: %v; fallback %v wanted", i, err, want)
		}
	}
}

func isFallback(err error) bool { return err != nil && errorsIs(err, isb.ErrFallback) }

// TestSinkSharedLimitExact: three replicas of the sink server share a limit
// of 300/s through a real Redis; the downstream never sees more than 300
// messages in a second.
func TestSinkSharedLimitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	rs := redistest.Start(t, redistest.Options{})
	ep := &endpoint{bodies: map[string]int{}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	const max = 300
	limits := fmt.Sprintf(`  limits:
    readBatchSize: 50
    readTimeout: 100ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
`, max, max, rs.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 3 {
		dir, _ := startReplica(t, sinkYAML(srv.URL, limits), r)
		c := connect(t, dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 1000; i++ {
				msgs := batch(fmt.Sprintf("r%d-%d", r, i), 50)
				errs := make([]error, len(msgs))
				if err := c.Write(ctx, msgs, errs); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.arrivals) == 0 {
		t.Fatal("nothing written")
	}
	per := map[int64]int{}
	for _, a := range ep.arrivals {
		per[a.Unix()]++
	}
	var counts []string
	first, last := ep.arrivals[0].Unix(), ep.arrivals[len(ep.arrivals)-1].Unix()
	for s := first; s <= last; s++ {
		counts = append(counts, fmt.Sprint(per[s]))
		if per[s] > max {
			t.Errorf("second %d: %d messages written; max %d", s, per[s], max)
		}
	}
	for b, n := range ep.bodies {
		if n > 1 {
			t.Errorf("%q written %d times", b, n)
		}
	}
	t.Logf("messages per second over 3 replicas: %s", strings.Join(counts, " "))
}

// TestSinkBadInput: a vertex without a sink is one usage error naming the
// field; an unreachable store is an error, never a served socket.
func TestSinkBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(path, []byte(`apiVersion: numaflow.numaproj.io/v1alpha1
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
`), 0o644)
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	err = runSink(context.Background(), Options{File: f, Path: path, Vertex: "in", SocketDir: t.TempDir(), Log: zap.NewNop()})
	if err == nil || !cli.IsUsage(err) || !strings.Contains(err.Error(), "spec.vertices[0].sink") {
		t.Fatalf("error %v; want a usage error naming spec.vertices[0].sink", err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	yaml := sinkYAML("http://127.0.0.1:1/", fmt.Sprintf(`  limits:
    rateLimit:
      max: 10
      store:
        redisStore:
          mode: single
          url: redis://%s
`, addr))
	p2 := filepath.Join(t.TempDir(), "v.yaml")
	os.WriteFile(p2, []byte(yaml), 0o644)
	f2, err := cli.LoadConfig(p2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	core, logs := observer.New(zap.InfoLevel)
	done := make(chan error, 1)
	go func() { done <- runSink(ctx, Options{File: f2, Path: p2, SocketDir: dir, Log: zap.New(core)}) }()
	// Polled while it runs: the socket must never appear.
	for served := false; !served; {
		select {
		case err = <-done:
			served = true
		case <-time.After(20 * time.Millisecond):
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("served %v without a store", ents)
			}
		}
	}
	var reasons []string
	for _, e := range logs.FilterMessage("not ready").All() {
		reasons = append(reasons, fmt.Sprint(e.ContextMap()["error"]))
	}
	if len(reasons) == 0 {
		t.Fatalf("no \"not ready\" log with the reason; returned %v", err)
	}
	if all := strings.Join(reasons, "; "); !strings.Contains(all, "awaiting_agreement") && !strings.Contains(all, "store_unavailable") {
		t.Errorf("not ready for %q; want the store named", all)
	}
	t.Logf("unreachable store: returned %v; not ready: %s", err, strings.Join(reasons, "; "))
}

var errorsIs = errors.Is

// nackingSink nacks the messages whose value ends in "-1", with options.
type nackingSink struct{}

func (nackingSink) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	for i, m := range msgs {
		errs[i] = nil
		if strings.HasSuffix(string(m.Value), "-1") {
			errs[i] = &isb.NackError{Options: isb.NackOptions{Reason: "not now", Delay: 250 * time.Millisecond, MaxDeliveries: 3}}
		}
	}
	return nil
}

// TestSinkNackAnswer: a message the sink nacks is answered NACK with the
// sink's options, over the wire.
func TestSinkNackAnswer(t *testing.T) {
	spec := vertex.Spec{Name: "nacks", Limits: vertex.Limits{ReadBatchSize: 10, ReadTimeout: 50 * time.Millisecond}, Sink: func(vertex.Env) (isb.Writer, error) { return nackingSink{}, nil }}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveSink(ctx, spec, Options{SocketDir: dir, Log: zap.NewNop()}, 0) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := connect(t, dir)
	msgs := batch("n", 3)
	errs := make([]error, len(msgs))
	if err := c.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	var ne *isb.NackError
	if !errors.As(errs[1], &ne) {
		t.Fatalf("message 1: %v; want a nack", errs[1])
	}
	if o := ne.Options; o.Reason != "not now" || o.Delay != 250*time.Millisecond || o.MaxDeliveries != 3 {
		t.Errorf("nack options %+v", o)
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("messages 0 and 2: %v, %v; want success", errs[0], errs[2])
	}
}

// capped accepts at most c requests a second and answers the rest 429 with
// Retry-After: 1.
type capped struct {
	mu       sync.Mutex
	c        int
	sec      int64
	n        int
	accepted int
	rejected int
}

func (h *capped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	now := time.Now().Unix()
	if now != h.sec {
		h.sec, h.n = now, 0
	}
	ok := h.n < h.c
	if ok {
		h.n++
		h.accepted++
	} else {
		h.rejected++
	}
	h.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// TestSinkAdaptiveCut: a downstream that answers 429 cuts the served
// vertex's limit (rateLimit.adaptive), shown by sluice_ratelimit_max_tokens
// on the role's /metrics, and every message is still answered success.
func TestSinkAdaptiveCut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	rs := redistest.Start(t, redistest.Options{})
	h := &capped{c: 30}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	yaml := sinkYAML(srv.URL, fmt.Sprintf(`  limits:
    readBatchSize: 20
    readTimeout: 100ms
    rateLimit:
      max: 200
      min: 10
      rampUpDuration: 0s
      adaptive:
        cutPercentage: 50
      store:
        redisStore:
          mode: single
          url: redis://%s
`, rs.Addr))
	path := filepath.Join(t.TempDir(), "v.yaml")
	os.WriteFile(path, []byte(yaml), 0o644)
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runSinkReplica(ctx, Options{File: f, Path: path, SocketDir: dir, Addr: addr, Log: zap.NewNop()}, 0)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c := connect(t, dir)
	wctx, wcancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer wcancel()
	written := 0
	for i := 0; wctx.Err() == nil && i < 100; i++ {
		msgs := batch(fmt.Sprintf("c%d", i), 20)
		errs := make([]error, len(msgs))
		if err := c.Write(wctx, msgs, errs); err != nil {
			break
		}
		for j, err := range errs {
			if err != nil {
				t.Fatalf("message %s: %v", msgs[j].ID, err)
			}
		}
		written += len(msgs)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := func(name string) float64 {
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
				var v float64
				fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
				return v
			}
		}
		return -1
	}
	h.mu.Lock()
	acc, rej := h.accepted, h.rejected
	h.mu.Unlock()
	if rej == 0 {
		t.Fatal("the endpoint rejected nothing")
	}
	cuts, ceiling := metric("sluice_ratelimit_cuts_total"), metric("sluice_ratelimit_ceiling_tokens")
	if cuts < 1 || ceiling < 0 || ceiling >= 200 {
		t.Errorf("after %d 429s: sluice_ratelimit_cuts_total %v, sluice_ratelimit_ceiling_tokens %v; want a cut below 200", rej, cuts, ceiling)
	}
	maxTokens := fmt.Sprintf("cuts %v, ceiling %v", cuts, ceiling)
	t.Logf("answered success %d; endpoint accepted %d, rejected %d; %s", written, acc, rej, maxTokens)
}

// TestSinkPipelineVertex: with --vertex, the role serves that vertex's
// sink of a Pipeline.
func TestSinkPipelineVertex(t *testing.T) {
	ep := &endpoint{bodies: map[string]int{}}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(path, []byte(`apiVersion: numaflow.numaproj.io/v1alpha1
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
        http:
          url: `+srv.URL+`
  edges:
    - from: in
      to: out
`), 0o644)
	f, err := cli.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runSinkReplica(ctx, Options{File: f, Path: path, Vertex: "out", SocketDir: dir, Log: zap.NewNop()}, 0)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := connect(t, dir)
	msgs := batch("p", 10)
	errs := make([]error, len(msgs))
	if err := c.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	if n := ep.count(); n != len(msgs) {
		t.Fatalf("endpoint got %d; want %d", n, len(msgs))
	}
}
