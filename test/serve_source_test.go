package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
)

// serveSource starts `vertex serve --role source` on the MonoVertex yaml,
// its socket in dir, and waits until it serves.
func serveSource(t testing.TB, dir, yaml string) *proc {
	t.Helper()
	p := start(t, "serve", "--role", "source", "-f", writeConfig(t, yaml), "--uds-dir", dir, "--addr", "127.0.0.1:0", "--log-level", "debug")
	p.waitFor(20*time.Second, "the served source", func() bool { return strings.Contains(p.stderr.String(), `"msg":"serving"`) })
	return p
}

// servedSourceClient starts `vertex run` of a MonoVertex whose udsource is the served
// socket in dir, writing to a log sink.
func servedSourceClient(t testing.TB, dir string) *proc { return servedSourceClientBatch(t, dir, 50) }

// servedSourceClientBatch is servedSourceClient reading batches of batch messages.
func servedSourceClientBatch(t testing.TB, dir string, batch int) *proc {
	t.Helper()
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: client
spec:
  limits:
    readBatchSize: %d
    readTimeout: 100ms
  source:
    udsource:
`, batch)+udContainer("      ", "", nil)+`  sink:
    log: {}
`)
	return start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0")
}

// TestServeSourceGenerator: a generator served under max 100 a second
// reaches the client's log sink once each, never more than 100 in a second
// of creation, and at least 80% of the limit over the full seconds.
func TestServeSourceGenerator(t *testing.T) {
	t.Parallel()
	const max = 100
	dir := t.TempDir()
	srv := serveSource(t, dir, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: served
spec:
  limits:
    readBatchSize: 20
    rateLimit:
      max: %d
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000
      duration: 100ms
  sink:
    log: {}
`, max))
	c := servedSourceClient(t, dir)
	c.waitFor(60*time.Second, "500 messages", func() bool { return len(c.lines) >= 500 })
	addr := regexp.MustCompile(`"msg":"serving".*"addr":"([^"]+)"`).FindStringSubmatch(srv.stderrText())
	if addr == nil {
		t.Fatalf("no address in the serving line:\n%s", srv.stderrText())
	}
	for _, path := range []string{"/status", "/metrics"} {
		resp, err := http.Get("http://" + addr[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}
	if code, _ := c.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, c.stderrText())
	}
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedEpochsWithin(t, srv.stderrText(), max)
	lines := c.stdoutLines()
	seen := map[string]bool{}
	for _, p := range payloads(t, lines) {
		if seen[p] {
			t.Fatalf("message %s reached the sink twice", p)
		}
		seen[p] = true
	}
	secs := perSecond(t, lines)
	total := 0
	for i, n := range secs {
		if n > max {
			t.Fatalf("second %d of %v: %d messages > max %d", i, secs, n, max)
		}
		if i > 0 && i < len(secs)-1 {
			total += n
		}
	}
	if full := len(secs) - 2; full > 0 && total < full*max*8/10 {
		t.Fatalf("per second %v: %d over %d full seconds, below 80%% of max %d", secs, total, full, max)
	}
	t.Logf("per second %v", secs)
}

// servedJSStream starts nats-server with a stream "orders" of n messages j-0... and
// a durable consumer orders-reader; it returns the server's URL.
func servedJSStream(t *testing.T, n int) string {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{})
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "orders", jetstream.ConsumerConfig{Durable: "orders-reader",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, "orders.new", []byte("j-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	return srv.URL
}

// servedJSConfig is the served MonoVertex over the stream of
// servedJSStream at url, at most max messages a second.
func servedJSConfig(url string, max int) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: served-js
spec:
  limits:
    readBatchSize: 20
    rateLimit:
      max: %d
      rampUpDuration: 0s
  source:
    jetstream:
      url: %s
      stream: orders
      consumer: orders-reader
  sink:
    log: {}
`, max, url)
}

// TestServeSourceJetStream: every message of a JetStream stream reaches the
// client's sink exactly once through the served source (acked ones never
// again, though the consumer redelivers the unacked after 2s); the served
// Pending is the consumer's, n before any read and 0 once all are acked.
func TestServeSourceJetStream(t *testing.T) {
	t.Parallel()
	const n = 600
	dir := t.TempDir()
	srv := serveSource(t, dir, servedJSConfig(servedJSStream(t, n), 300))
	pc := servedPending(t, dir)
	if got := pendingOf(pc); got != n {
		t.Errorf("pending %d before any read; want the consumer's %d", got, n)
	}
	c := servedSourceClient(t, dir)
	c.waitFor(60*time.Second, "every message", func() bool { return len(c.lines) >= n })
	runtest.WaitFor(t, "pending 0", func() bool { return pendingOf(pc) == 0 }, runtest.Within(10*time.Second))
	// Long enough for any unacked message to come back (AckWait 2s).
	time.Sleep(3 * time.Second)
	c.stop(syscall.SIGTERM, 30*time.Second)
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedEpochsWithin(t, srv.stderrText(), 300)
	for i, k := range servedCount(t, c.stdoutLines(), "j-", n) {
		if k != 1 {
			t.Fatalf("j-%d reached the sink %d times", i, k)
		}
	}
}

// TestServeSourceRestart: the served source stops (SIGTERM) mid-stream
// and starts again while its client runs on, reconnecting; every message of
// the stream reaches the sink at least once, and no epoch of either served
// process granted more than max.
func TestServeSourceRestart(t *testing.T) {
	t.Parallel()
	const n, max = 600, 100
	dir := t.TempDir()
	url := servedJSStream(t, n)
	srv := serveSource(t, dir, servedJSConfig(url, max))
	c := servedSourceClient(t, dir)
	c.waitFor(60*time.Second, "a third of the messages", func() bool { return len(c.lines) >= n/3 })
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
	servedEpochsWithin(t, srv.stderrText(), max)
	srv2 := serveSource(t, dir, servedJSConfig(url, max))
	c.waitFor(60*time.Second, "every message", func() bool {
		seen := map[string]bool{}
		for _, p := range payloads(t, c.lines) {
			seen[p] = true
		}
		return len(seen) >= n
	})
	for i, k := range servedCount(t, c.stdoutLines(), "j-", n) {
		if k == 0 {
			t.Fatalf("j-%d lost", i)
		}
	}
	if code, _ := c.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("client exit %d; stderr:\n%s", code, c.stderrText())
	}
	if code, _ := srv2.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv2.stderrText())
	}
	servedEpochsWithin(t, srv2.stderrText(), max)
}

// TestServeSourceClientKilled: the served source's client is killed
// (SIGKILL) mid-stream and another takes its place; what the first read and
// did not ack goes back to the stream, and every message reaches a sink at
// least once.
func TestServeSourceClientKilled(t *testing.T) {
	t.Parallel()
	const n = 600
	dir := t.TempDir()
	srv := serveSource(t, dir, servedJSConfig(servedJSStream(t, n), 200))
	c := servedSourceClient(t, dir)
	c.waitFor(60*time.Second, "a third of the messages", func() bool { return len(c.lines) >= n/3 })
	c.stop(syscall.SIGKILL, 10*time.Second)
	first := c.stdoutLines()
	c2 := servedSourceClient(t, dir)
	c2.waitFor(60*time.Second, "every message", func() bool {
		seen := map[string]bool{}
		for _, p := range append(payloads(t, first), payloads(t, c2.lines)...) {
			seen[p] = true
		}
		return len(seen) >= n
	})
	for i, k := range servedCount(t, append(first, c2.stdoutLines()...), "j-", n) {
		if k == 0 {
			t.Fatalf("j-%d lost", i)
		}
	}
	c2.stop(syscall.SIGTERM, 30*time.Second)
	if code, _ := srv.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("served source exit %d; stderr:\n%s", code, srv.stderrText())
	}
}

// servedEpochsWithin checks the served source's debug log: it logged epochs, and
// none granted more than max.
func servedEpochsWithin(t *testing.T, log string, max int64) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `"msg":"epoch"`) {
			continue
		}
		var e struct{ Epoch, Granted, Max int64 }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("epoch log %q: %v", l, err)
		}
		if e.Granted > max {
			t.Fatalf("epoch %d granted %d > max %d", e.Epoch, e.Granted, max)
		}
		n++
	}
	if n == 0 {
		t.Fatal("the served source logged no epoch")
	}
}

// TestServeSourceBadInput: a file whose source the role cannot serve is one
// usage error naming the field, exit 2.
func TestServeSourceBadInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, yaml, want string }{
		{"no source", `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  sink:
    log: {}
`, "spec.source: is required"},
		{"a transformer", `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  source:
    generator: {}
    transformer:
      container:
        image: example:latest
  sink:
    log: {}
`, "spec.source.transformer"},
		{"udsource", `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: mv
spec:
  source:
    udsource:
      container:
        image: example:latest
  sink:
    log: {}
`, "spec.source.udsource"},
		{"a pipeline vertex without a source", `apiVersion: numaflow.numaproj.io/v1alpha1
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
`, `vertex "out"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"serve", "--role", "source", "-f", writeConfig(t, tt.yaml), "--uds-dir", t.TempDir(), "--addr", "127.0.0.1:0"}
			if strings.Contains(tt.yaml, "Pipeline") {
				args = append(args, "--vertex", "out")
			}
			p := start(t, args...)
			<-p.done
			if code := p.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(p.stderrText(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, p.stderrText(), tt.want)
			}
		})
	}
}
