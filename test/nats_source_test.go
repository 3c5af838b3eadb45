package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// payloadCounts counts the payloads of log-sink lines.
func payloadCounts(lines ...[]string) map[string]int {
	counts := map[string]int{}
	for _, ls := range lines {
		for _, l := range ls {
			if payload, _, ok := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - "); ok {
				counts[payload]++
			}
		}
	}
	return counts
}

// TestNATSSource publishes 300 messages on a subject that a vertex reads at
// most 100 a second with a token, in a queue group: every one reaches the
// log sink once, at no more than 100 a second.
func TestNATSSource(t *testing.T) {
	t.Parallel()
	const n, max = 300, 100
	srv := natstest.Start(t, natstest.Options{Token: "s3cret"})
	token := writeSecret(t, "s3cret")
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: nats-in
spec:
  limits:
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    nats:
      url: %s
      subject: events.in
      queue: nats-in
      auth:
        token: {file: %s}
  sink:
    log: {}
`, max, max, srv.Addr, token))
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	p.metricsAddr()
	nc := srv.Connect(t)
	// The subscription is made before the vertex serves its metrics.
	for i := range n {
		if err := nc.Publish("events.in", []byte("n-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	p.waitFor(20*time.Second, "every message at the sink", func() bool { return len(p.lines) >= n })
	took := time.Since(began)
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	counts := payloadCounts(p.stdoutLines())
	for i := range n {
		if got := counts["n-"+strconv.Itoa(i)]; got != 1 {
			t.Errorf("n-%d at the sink %d times; want once", i, got)
		}
	}
	// n/max epochs, the first and the last of which may be cut short.
	if took < time.Duration(n/max-2)*time.Second {
		t.Errorf("%d messages in %v at %d/s", n, took, max)
	}
	granted, _ := sumEpochs(t, []*proc{p})
	if len(granted) == 0 {
		t.Fatal("no epoch in the debug log")
	}
	for e, g := range granted {
		if g > max {
			t.Errorf("epoch %d granted %d; max %d", e, g, max)
		}
	}
	t.Logf("%d messages in %v; grants by epoch %v", n, took.Round(time.Millisecond), granted)
}

// TestJetStreamSourceReplicaKilled has two replicas read one stream through
// the durable consumer they share, at most 200 a second each; one is killed
// with SIGKILL mid-run. Every message reaches a log sink at least once, and
// those that reach one twice are at most what the killed replica had read and
// not acked.
func TestJetStreamSourceReplicaKilled(t *testing.T) {
	t.Parallel()
	const n = 1500
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	// The replicas share a durable consumer made here, as many users make
	// theirs, with a short ack wait: what the killed replica read and did not
	// ack comes back 2s later.
	if _, err := js.CreateOrUpdateConsumer(ctx, "orders", jetstream.ConsumerConfig{Durable: "orders-reader",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, "orders.new", []byte("j-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: js-in
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
    rateLimit:
      max: 200
      min: 200
      rampUpDuration: 0s
  source:
    jetstream:
      url: %s
      stream: orders
      consumer: orders-reader
  sink:
    log: {}
`, srv.URL))
	procs := []*proc{
		start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", "0"),
		start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", "1"),
	}
	for _, p := range procs {
		p.metricsAddr()
	}
	procs[1].waitFor(20*time.Second, "some messages at replica 1's sink", func() bool { return len(procs[1].lines) >= 200 })
	procs[1].cmd.Process.Kill()
	<-procs[1].done
	procs[0].waitFor(30*time.Second, "every message at a sink", func() bool {
		return len(payloadCounts(procs[0].lines, procs[1].stdoutLines())) >= n
	})
	if code, _ := procs[0].stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, procs[0].stderrText())
	}
	counts := payloadCounts(procs[0].stdoutLines(), procs[1].stdoutLines())
	twice := 0
	for i := range n {
		switch got := counts["j-"+strconv.Itoa(i)]; {
		case got == 0:
			t.Errorf("j-%d lost", i)
		case got > 1:
			twice += got - 1
		}
	}
	if twice > 50 {
		t.Errorf("%d messages at a sink twice; the killed replica held at most a batch of 50", twice)
	}
	t.Logf("replica 0 wrote %d, the killed replica %d; %d twice", len(procs[0].stdoutLines()), len(procs[1].stdoutLines()), twice)
}
