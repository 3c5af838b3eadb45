package watermark_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// Two replicas of a source publish their watermarks to the store of the edge
// they write to; the vertex downstream fetches the smallest, and drops a
// replica that stops heartbeating once its timeout has passed.
func Example() {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	store := &watermark.MemStore{}

	cfg := watermark.Config{MaxDelay: 2 * time.Second}
	var pubs []*watermark.Publisher
	for i, eventTime := range []time.Time{start.Add(-10 * time.Second), start.Add(-30 * time.Second)} {
		src, _ := watermark.NewSource(cfg, watermark.WithClock(clk))
		src.Observe(0, eventTime) // a batch read from partition 0 of the source
		pub, _ := watermark.NewPublisher(ctx, store, fmt.Sprintf("in-%d", i), watermark.WithClock(clk))
		_ = pub.Publish(ctx, 0, src.Watermark(), 0) // to partition 0 of the edge, having written nothing
		pubs = append(pubs, pub)
	}

	f, _ := watermark.NewFetcher(store, 0, watermark.WithClock(clk), watermark.WithTimeout(10*time.Second))
	_ = f.Refresh(ctx)
	wm := f.At(0)
	fmt.Println("both live:", wm.Sub(start))

	clk.Advance(11 * time.Second) // in-1 dies; in-0 heartbeats
	_ = pubs[0].Heartbeat(ctx)
	_ = f.Refresh(ctx)
	wm = f.At(0)
	fmt.Println("in-1 timed out:", wm.Sub(start))
	// Output:
	// both live: -32s
	// in-1 timed out: -12s
}
