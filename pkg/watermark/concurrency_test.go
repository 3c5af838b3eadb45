package watermark_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// Publishers on several goroutines and fetchers on others: every fetched
// watermark is at least the one before, and at the end the minimum of the
// last watermarks published.
func TestConcurrentPublishAndFetch(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0) // never moves: every heartbeat stays live
	store := &watermark.MemStore{}
	const processors, partitions, rounds = 4, 3, 200
	pubs := make([]*watermark.Publisher, processors)
	for i := range pubs {
		p, err := watermark.NewPublisher(ctx, store, fmt.Sprintf("p-%d", i), watermark.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		pubs[i] = p
		for part := range int32(partitions) { // all start at 0, so the minimum moves with the slowest
			_ = p.Publish(ctx, part, at(0), 0)
		}
	}
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				for part := range int32(partitions) {
					if err := p.Publish(ctx, part, at(time.Duration(r*(i+1))*time.Millisecond), int64(r)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	var fetchers sync.WaitGroup
	for range 2 {
		fetchers.Add(1)
		go func() {
			defer fetchers.Done()
			f, _ := watermark.NewFetcher(store, 1, watermark.WithClock(clk))
			last := watermark.None()
			for reached := int64(0); ; reached++ {
				if err := f.Refresh(ctx); err != nil {
					t.Error(err)
					return
				}
				wm := f.At(reached)
				if wm.Before(last) {
					t.Errorf("watermark went back: %s after %s", wm, last)
					return
				}
				last = wm
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	fetchers.Wait()
	f, _ := watermark.NewFetcher(store, 2, watermark.WithClock(clk))
	_ = f.Refresh(ctx)
	if wm := f.At(rounds); !wm.Equal(at(rounds * time.Millisecond)) {
		t.Fatalf("final watermark %s, want %s (the slowest publisher's last)", wm.Sub(t0), time.Duration(rounds)*time.Millisecond)
	}
}
