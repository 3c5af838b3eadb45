package source_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// benchBatch is the read batch of the benchmarks; an iteration reads and
// acks this many messages.
const benchBatch = 500

var benchPayload = []byte("a small payload of 32 bytes.....")

// readAcked reads and acks n messages in reads of at most benchBatch.
func readAcked(b *testing.B, r isb.Reader, buf []isb.ReadMessage, n int) {
	ctx := context.Background()
	for got := 0; got < n; {
		k, err := r.Read(ctx, buf[:min(benchBatch, n-got)])
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			b.Fatalf("no message within the read timeout after %d of %d", got, n)
		}
		if err := r.Ack(ctx, buf[:k]); err != nil {
			b.Fatal(err)
		}
		got += k
	}
}

// BenchmarkNATSRead reads and acks, in batches of 500, small messages that
// another connection publishes meanwhile, at most 2000 ahead of the reads so
// that the source's buffer never overflows.
func BenchmarkNATSRead(b *testing.B) {
	const window = 4 * benchBatch
	s := natstest.Start(b, natstest.Options{})
	src := newNATS(b, s, source.NATSConfig{Buffer: 2 * window, ReadTimeout: time.Second, Logger: zap.NewNop()})
	nc := s.Connect(b)
	total := b.N * benchBatch
	var read atomic.Int64
	wake := make(chan struct{}, 1)
	var publisher sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); publisher.Wait() }()
	buf := make([]isb.ReadMessage, benchBatch)
	b.ReportAllocs()
	b.ResetTimer()
	publisher.Go(func() {
		for sent := 0; sent < total; {
			if sent-int(read.Load()) >= window {
				_ = nc.Flush()
				select {
				case <-wake:
				case <-ctx.Done():
					return
				}
				continue
			}
			if err := nc.Publish("in", benchPayload); err != nil {
				return
			}
			sent++
		}
		_ = nc.Flush()
	})
	for got := 0; got < total; {
		k, err := src.Read(ctx, buf[:min(benchBatch, total-got)])
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			b.Fatalf("no message within the read timeout after %d of %d", got, total)
		}
		if err := src.Ack(ctx, buf[:k]); err != nil {
			b.Fatal(err)
		}
		got += k
		read.Add(int64(k))
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msg/s")
	if d := src.Dropped(); d > 0 {
		b.Fatalf("%d dropped", d)
	}
}

// BenchmarkJetStreamRead reads and acks (double acks, confirmed), in batches
// of 500, small messages published to the stream beforehand (not timed).
func BenchmarkJetStreamRead(b *testing.B) {
	for _, storage := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		b.Run(storage.String(), func(b *testing.B) {
			s := natstest.Start(b, natstest.Options{})
			js, err := jetstream.New(s.Connect(b))
			if err != nil {
				b.Fatal(err)
			}
			_, err = js.CreateStream(natsCtx(b), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: storage})
			if err != nil {
				b.Fatal(err)
			}
			src := newJS(b, s, source.JetStreamConfig{ReadTimeout: time.Second, Logger: zap.NewNop()})
			publishAsync(b, js, b.N*benchBatch)
			buf := make([]isb.ReadMessage, benchBatch)
			b.ReportAllocs()
			b.ResetTimer()
			readAcked(b, src, buf, b.N*benchBatch)
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// publishAsync publishes n messages to s.a and waits for the stream to
// store them.
func publishAsync(b *testing.B, js jetstream.JetStream, n int) {
	for range n {
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "s.a", Data: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing timed out")
	}
}
