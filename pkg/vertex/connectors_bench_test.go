package vertex_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// benchVertex runs the MonoVertex of yaml until it has written n messages and
// reports msg/s from its start.
func benchVertex(b *testing.B, yaml string, n int) {
	b.Helper()
	f, err := vertexconfig.Parse([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	v, err := vertex.New(vertexconfig.FromMonoVertex(f.MonoVertex), vertex.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- v.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for v.Written() < float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("wrote %v of %d in 2 minutes", v.Written(), n)
		}
		time.Sleep(time.Millisecond) // polling a running vertex, bounded by the deadline
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/took.Seconds(), "msg/s")
}

// BenchmarkKafkaSource reads a topic of three partitions into a blackhole,
// without a rate limit and with one far above what the source gives (the
// limiter's cost alone). Each iteration reads the 50,000 records through a
// consumer group of its own. The cluster is franz-go's in-process kfake, reached over
// TCP on loopback.
func BenchmarkKafkaSource(b *testing.B) {
	const n = 50_000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf(`{"value":%d,"pad":"0123456789abcdef"}`, i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	for _, limit := range []string{"off", "on"} {
		b.Run("limit="+limit, func(b *testing.B) {
			rl := ""
			if limit == "on" {
				rl = "    rateLimit:\n      max: 100000000\n      min: 100000000\n      rampUpDuration: 0s\n"
			}
			for i := range b.N {
				benchVertex(b, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: kafka-bench
spec:
  limits:
    readBatchSize: 500
%s  source:
    kafka:
      brokers: [%s]
      topic: in
      consumerGroup: bench-%s-%d-%d
  sink:
    blackhole: {}
`, rl, strings.Join(c.ListenAddrs(), ","), limit, i, time.Now().UnixNano()), n)
			}
		})
	}
}

// BenchmarkHTTPSink writes a generator's messages to a local endpoint that
// answers 204: one request per message (concurrency 16), and a JSON array per
// batch of 500.
func BenchmarkHTTPSink(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, mode := range []struct {
		name  string
		batch bool
		n     int
	}{{"per-message", false, 20_000}, {"batch", true, 500_000}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				benchVertex(b, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: http-bench
spec:
  limits:
    readBatchSize: 500
  source:
    generator:
      rpu: 100000000
  sink:
    http:
      url: %s/ingest
      batch: %v
`, srv.URL, mode.batch), mode.n)
			}
		})
	}
}
