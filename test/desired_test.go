package test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/redistest"
)

// desiredVertexYAML is a MonoVertex reading the JetStream consumer orders-reader
// of url at most max a second into sink, scaled within [1, 20] on a lookback
// of 5 s with a target processing time of 60 s, without cool-downs.
func desiredVertexYAML(name, url string, max int, sink string) string {
	return desiredVertexStoreYAML(name, url, max, "", sink)
}

// desiredVertexStoreYAML is desiredVertexYAML with the rate limit's store
// block (indented by six), or none.
func desiredVertexStoreYAML(name, url string, max int, store, sink string) string {
	// targetProcessingSeconds 60: 20,000 pending at 50/s ask for
	// ceil(20,000 / 60 / 50) = 7 replicas.
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
      min: %d
      rampUpDuration: 0s
%s  scale:
    min: 1
    max: 20
    lookbackSeconds: 5
    scaleUpCooldownSeconds: 0
    scaleDownCooldownSeconds: 0
    targetProcessingSeconds: 60
    replicasPerScaleUp: 20
  source:
    jetstream:
      url: %s
      stream: orders
      consumer: orders-reader
  sink:
%s`, name, max, max, store, url, sink)
}

// jetStreamBacklog starts a NATS server with a stream of n messages and a
// durable consumer of it, and returns the server's URL.
func jetStreamBacklog(t *testing.T, n int) string {
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
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		js.PublishAsync("orders.new", []byte("o-"+strconv.Itoa(i)))
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing the backlog timed out")
	}
	return srv.URL
}

// desiredSamples reads sluice_desired_replicas and the messages read from
// the replica at addr once a second, n times after the first, and returns
// the gauge's values, the rate read in each second and the source's
// pending count.
func desiredSamples(t *testing.T, addr string, n int) (gauge, rate, pending []float64) {
	t.Helper()
	prev, at := metricSum(t, addr, "sluice_forward_read_total"), time.Now()
	for range n {
		time.Sleep(time.Second)
		read, now := metricSum(t, addr, "sluice_forward_read_total"), time.Now()
		gauge = append(gauge, metricSum(t, addr, "sluice_desired_replicas"))
		pending = append(pending, metricSum(t, addr, "sluice_source_pending"))
		rate = append(rate, (read-prev)/now.Sub(at).Seconds())
		prev, at = read, now
	}
	return gauge, rate, pending
}

// TestDesiredReplicasGauge runs `vertex run` on a JetStream backlog of
// 20,000 messages and reads sluice_desired_replicas, in real time:
//
//   - under the limit: the sink (an HTTP endpoint that takes 20 ms a
//     request, one at a time) holds one replica to at most 50/s, well below
//     its pool of 2,000/s; once the rule has seen the lookback, the gauge
//     reads the replicas that drain what is pending within the 60 s target,
//     ceil(pending / 60 / rate), within one (the backlog drains and the
//     rate varies a little over the lookback), 7 at 50/s;
//   - at the limit: a log sink and a limit of 100/s hold the replica at
//     its limit; the gauge reads 1, the replica there is, at every second;
//   - two replicas at the limit, sharing it through a real redis-server:
//     each replica's gauge reads 2 at every second, the same for both.
func TestDesiredReplicasGauge(t *testing.T) {
	t.Parallel()
	t.Run("under-the-limit", func(t *testing.T) {
		t.Parallel()
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(slow.Close)
		url := jetStreamBacklog(t, 20000)
		cfg := writeConfig(t, desiredVertexYAML("desired-under", url, 2000,
			fmt.Sprintf("    http:\n      url: %s/api\n      concurrency: 1\n", slow.URL)))
		p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
		addr := p.metricsAddr()
		desiredSamples(t, addr, 6) // the lookback and the first pending count
		gauge, rate, pending := desiredSamples(t, addr, 5)
		t.Logf("desired %v, read/s %v, pending %v", gauge, rate, pending)
		// The rate over the samples: reads come a batch at a time, so one
		// second alone may see none while the sink writes the last batch.
		mean := 0.0
		for _, r := range rate {
			mean += r / float64(len(rate))
		}
		for i, g := range gauge {
			want := math.Ceil(pending[i] / 60 / max(mean, 1))
			if g < 2 || math.Abs(g-want) > 1 {
				t.Errorf("second %d: sluice_desired_replicas = %v at %.0f/s over the samples with %v pending; want %v (within one)", i, g, mean, pending[i], want)
			}
		}
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	})
	t.Run("at-the-limit", func(t *testing.T) {
		t.Parallel()
		url := jetStreamBacklog(t, 20000)
		p := start(t, "run", "-f", writeConfig(t, desiredVertexYAML("desired-at", url, 100, "    log: {}\n")),
			"--metrics-addr", "127.0.0.1:0")
		addr := p.metricsAddr()
		desiredSamples(t, addr, 6)
		gauge, rate, _ := desiredSamples(t, addr, 5)
		t.Logf("desired %v, read/s %v", gauge, rate)
		for i, g := range gauge {
			if g != 1 {
				t.Errorf("second %d: sluice_desired_replicas = %v at %.0f/s, held at the limit; want 1", i, g, rate[i])
			}
		}
		if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	})
	t.Run("two-replicas-at-the-limit", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		url := jetStreamBacklog(t, 20000)
		store := fmt.Sprintf("      store:\n        redisStore:\n          mode: single\n          url: redis://%s\n", srv.Addr)
		cfg := writeConfig(t, desiredVertexStoreYAML("desired-two", url, 100, store, "    log: {}\n"))
		var addrs []string
		for i := range 2 {
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--replica", fmt.Sprint(i))
			addrs = append(addrs, p.metricsAddr())
			defer func() {
				if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
					t.Errorf("replica %d: exit %d; stderr:\n%s", i, code, p.stderrText())
				}
			}()
		}
		desiredSamples(t, addrs[0], 6)
		for i := range 5 {
			time.Sleep(time.Second)
			a, b := metricSum(t, addrs[0], "sluice_desired_replicas"), metricSum(t, addrs[1], "sluice_desired_replicas")
			t.Logf("second %d: desired %v and %v", i, a, b)
			if a != 2 || b != 2 {
				t.Errorf("second %d: sluice_desired_replicas = %v and %v for two replicas held at their shared limit; want 2 at both", i, a, b)
			}
		}
	})
}
