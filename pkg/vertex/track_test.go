package vertex

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// offsetReader hands out queued messages whose handles are their offsets,
// and records what it is given back.
type offsetReader struct {
	queue         []int64
	start         int64
	acked, nacked []int64
}

func (r *offsetReader) Read(_ context.Context, buf []isb.ReadMessage) (int, error) {
	n := copy(make([]int64, len(buf)), r.queue)
	for i, o := range r.queue[:n] {
		buf[i] = isb.ReadMessage{Message: isb.Message{EventTime: time.UnixMilli(o * 1000)}, Handle: o}
	}
	r.queue = r.queue[n:]
	return n, nil
}

func (r *offsetReader) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	for _, m := range msgs {
		r.acked = append(r.acked, m.Handle.(int64))
	}
	return nil
}

func (r *offsetReader) Nack(_ context.Context, msgs []isb.ReadMessage, _ time.Duration) error {
	for _, m := range msgs {
		r.nacked = append(r.nacked, m.Handle.(int64))
		r.queue = append(r.queue, m.Handle.(int64))
	}
	return nil
}

func (r *offsetReader) Offset(m *isb.ReadMessage) int64 { return m.Handle.(int64) }
func (r *offsetReader) StartOffset() int64              { return r.start }

// The frontier of a buffer partition's reader is the offset up to which
// every message read is acked: batches acked out of order, and messages
// handed back, hold it until they are finished.
func TestTrackerFrontier(t *testing.T) {
	ctx := context.Background()
	inner := &offsetReader{queue: []int64{11, 12, 13, 14, 15, 16}, start: 10}
	tr := newTracker(inner, nil, 0)
	r := tr.reader()
	nack, ok := r.(isb.Nacker)
	if !ok {
		t.Fatal("the tracked reader of a Nacker is no Nacker")
	}
	if _, ok := r.(isb.OptionsNacker); ok {
		t.Fatal("the tracked reader of a reader without NackOptions has it")
	}
	if f := tr.frontier(); f != 10 {
		t.Fatalf("before any read: frontier %d, want the start offset 10", f)
	}
	a := make([]isb.ReadMessage, 2)
	b := make([]isb.ReadMessage, 2)
	c := make([]isb.ReadMessage, 2)
	for _, buf := range [][]isb.ReadMessage{a, b, c} {
		if n, err := r.Read(ctx, buf); n != 2 || err != nil {
			t.Fatalf("Read: %d, %v", n, err)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want int64
	}{
		{"all read, none acked", func() error { return nil }, 10},
		{"the second batch acked", func() error { return r.Ack(ctx, b) }, 10},
		{"the first batch acked: both count", func() error { return r.Ack(ctx, a) }, 14},
		{"15 acked, 16 handed back", func() error {
			if err := r.Ack(ctx, c[:1]); err != nil {
				return err
			}
			return nack.Nack(ctx, c[1:], 0)
		}, 15},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if f := tr.frontier(); f != s.want {
			t.Fatalf("%s: frontier %d, want %d", s.name, f, s.want)
		}
	}
	if got := inner.acked; len(got) != 5 || got[0] != 13 || got[2] != 11 {
		t.Fatalf("the reader was acked %v, with its own handles in the order acked", got)
	}
	again := make([]isb.ReadMessage, 2)
	if n, _ := r.Read(ctx, again); n != 1 {
		t.Fatalf("the handed-back message not read again: %d", n)
	}
	if f := tr.frontier(); f != 15 {
		t.Fatalf("read again, not acked: frontier %d, want 15", f)
	}
	if err := r.Ack(ctx, again[:1]); err != nil {
		t.Fatal(err)
	}
	if f := tr.frontier(); f != 16 {
		t.Fatalf("all acked: frontier %d, want 16", f)
	}
}

// A source's batches move its watermark once they are finished, in the
// order they were read: a batch acked first waits for the one before it.
func TestTrackerSource(t *testing.T) {
	ctx := context.Background()
	src, err := watermark.NewSource(watermark.Config{}, watermark.WithClock(clock.NewManual(time.UnixMilli(0))))
	if err != nil {
		t.Fatal(err)
	}
	inner := &offsetReader{queue: []int64{5, 6, 9, 8}}
	tr := newTracker(inner, src, 0)
	r := tr.reader()
	a, b := make([]isb.ReadMessage, 2), make([]isb.ReadMessage, 2)
	_, _ = r.Read(ctx, a)
	_, _ = r.Read(ctx, b)
	if wm := src.Watermark(); !watermark.IsNone(wm) {
		t.Fatalf("nothing finished: %s", wm)
	}
	_ = r.Ack(ctx, b)
	if wm := src.Watermark(); !watermark.IsNone(wm) {
		t.Fatalf("the second batch finished before the first: %s", wm)
	}
	_ = r.Ack(ctx, a)
	if wm, want := src.Watermark(), time.UnixMilli(8000).UTC(); !wm.Equal(want) {
		t.Fatalf("both finished: %s, want %s (the second batch's oldest event time)", wm, want)
	}
}

// partitionedReader is offsetReader as a source of two partitions: even
// handles from partition 0, odd ones from 1.
type partitionedReader struct {
	offsetReader
	gone func([]int32)
}

func (r *partitionedReader) Partition(m *isb.ReadMessage) int32 { return int32(m.Handle.(int64) % 2) }
func (r *partitionedReader) OnPartitionsGone(f func([]int32))   { r.gone = f }

// A partitioned source's watermark is the oldest of its partitions', and a
// partition taken away holds it back no more.
func TestTrackerSourcePartitions(t *testing.T) {
	ctx := context.Background()
	src, err := watermark.NewSource(watermark.Config{}, watermark.WithClock(clock.NewManual(time.UnixMilli(0))))
	if err != nil {
		t.Fatal(err)
	}
	inner := &partitionedReader{offsetReader: offsetReader{queue: []int64{4, 9, 6, 11}}}
	r := newTracker(inner, src, 0).reader()
	buf := make([]isb.ReadMessage, 4)
	if n, _ := r.Read(ctx, buf); n != 4 {
		t.Fatalf("read %d", n)
	}
	_ = r.Ack(ctx, buf)
	if wm, want := src.Watermark(), time.UnixMilli(4000).UTC(); !wm.Equal(want) {
		t.Fatalf("watermark %s, want %s: partition 0's", wm, want)
	}
	inner.gone([]int32{0})
	if wm, want := src.Watermark(), time.UnixMilli(9000).UTC(); !wm.Equal(want) {
		t.Fatalf("partition 0 gone: watermark %s, want %s: partition 1's", wm, want)
	}
}
