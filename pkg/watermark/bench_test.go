package watermark_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// BenchmarkSource is a source's work per batch of 64 messages: observe the
// batch's event times and compute the watermark.
func BenchmarkSource(b *testing.B) {
	clk := clock.NewManual(t0)
	src, _ := watermark.NewSource(watermark.Config{MaxDelay: time.Second,
		IdleSource: &watermark.IdleSource{Threshold: time.Second, IncrementBy: time.Second}}, watermark.WithClock(clk))
	batch := make([]time.Time, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range batch {
			batch[j] = at(time.Duration(i*64+j) * time.Millisecond)
		}
		src.Observe(int32(i%4), batch...)
		_ = src.Watermark()
	}
}

// BenchmarkFetchMem is a reader's refresh from a memory store of 8
// processors on 4 partitions, and its watermark at an offset.
func BenchmarkFetchMem(b *testing.B) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	store := &watermark.MemStore{}
	for i := range 8 {
		for part := range int32(4) {
			_ = store.Put(ctx, watermark.Entry{Processor: fmt.Sprintf("p-%d", i), Partition: part, Watermark: at(time.Second), Heartbeat: t0})
		}
	}
	f, _ := watermark.NewFetcher(store, 1, watermark.WithClock(clk))
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		_ = f.At(1)
	}
}

// BenchmarkAt is a reader's watermark at an offset, without a refresh: what
// a reader computes after each batch.
func BenchmarkAt(b *testing.B) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	store := &watermark.MemStore{}
	for i := range 8 {
		_ = store.Put(ctx, watermark.Entry{Processor: fmt.Sprintf("p-%d", i), Watermark: at(time.Second), Heartbeat: t0})
	}
	f, _ := watermark.NewFetcher(store, 0, watermark.WithClock(clk))
	_ = f.Refresh(ctx)
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		_ = f.At(i)
	}
}
