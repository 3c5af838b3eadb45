package vertex_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// TestKafkaPendingIsTheGroups runs two replicas of a Kafka MonoVertex in one
// consumer group on franz-go's in-process cluster, with 30 messages over 3
// partitions and a limit of 1 message a second on a clock that stands still:
// each replica's monovtx_pending_raw, which Numaflow's daemon reads from
// replica 0 as the whole source's, is the group's lag over every partition
// (30, less the messages read: one per replica and second), not the
// replica's part.
func TestKafkaPendingIsTheGroups(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 30 {
		rec := &kgo.Record{Topic: "in", Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	spec := vertexconfig.FromMonoVertex(monoVertex(t, "kafka-pending", fmt.Sprintf(`  limits:
    rateLimit:
      max: 1
      min: 1
      rampUpDuration: 0s
  source:
    kafka:
      brokers: [%s]
      topic: in
      consumerGroup: pending
  sink:
    blackhole: {}
`, strings.Join(c.ListenAddrs(), ","))))
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var regs []*prometheus.Registry
	for i := range 2 {
		reg := prometheus.NewRegistry()
		v, err := vertex.New(spec, vertex.WithReplica(i), vertex.WithClock(clk), vertex.WithRegisterer(reg), vertex.WithNumaflowMetrics())
		if err != nil {
			t.Fatal(err)
		}
		runtest.Start(t, v)
		regs = append(regs, reg)
	}
	// A pending count asked before the group's coordinator answers is -1:
	// each wrong answer moves the clock on to the next poll, and lets each
	// replica read one message more.
	advanced := 0
	for i, reg := range regs {
		runtest.WaitFor(t, "the group's pending count", func() bool {
			n := numaflowValue(t, scrape(t, reg), "monovtx_pending_raw", "kafka-pending", fmt.Sprint(i))
			if low := float64(30 - 2*(advanced+1)); n < low || n > 30 {
				own, _ := gaugeValue(t, reg, "sluice_source_pending")
				t.Logf("replica %d: monovtx_pending_raw %v, sluice_source_pending %v; want %v to 30", i, n, own, low)
				clk.Advance(vertex.PendingPoll)
				advanced++
				return false
			}
			return true
		}, runtest.Within(20*time.Second), runtest.Every(500*time.Millisecond))
	}
}
