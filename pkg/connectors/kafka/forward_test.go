package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/forward"
)

// TestForwardTopicToTopic runs a forwarder from a source to a sink: every
// record of "in" arrives once in "out", and the group commits all of "in".
func TestForwardTopicToTopic(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "in", "out"))
	adm, cl := newAdmin(t, c)
	produce(t, cl, spread("in", 3, 0, 600)...)
	src := newTestSource(t, c, "g", nil, "in")
	dst := newTestSink(t, c.ListenAddrs(), "out", true, nil)
	tr := forward.NewTracker(nil)
	f, err := forward.New(forward.Deps{Reader: src, Sink: dst,
		Metrics: forward.NewMetrics(prometheus.NewRegistry(), tr), Tracker: tr}, forward.Options{BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	runtest.WaitFor(t, "all of in committed", func() bool {
		return committed(t, adm, "g", "in", 0)+committed(t, adm, "g", "in", 1)+committed(t, adm, "g", "in", 2) == 600
	}, runtest.Within(20*time.Second))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range consume(t, c.ListenAddrs(), "out", 600) {
		seen[string(r.Value)]++
	}
	if len(seen) != 600 {
		t.Fatalf("out holds %d distinct values; want 600", len(seen))
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("%s written %d times", v, n)
		}
	}
}
