package kafka

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// BenchmarkSourceRead reads and acks b.N records of 100 bytes, produced
// beforehand over 3 partitions, in batches of 500.
func BenchmarkSourceRead(b *testing.B) {
	c := newCluster(b, kfake.SeedTopics(3, "bench"))
	_, cl := newAdmin(b, c)
	value := bytes.Repeat([]byte("v"), 100)
	for from := 0; from < b.N; from += 10000 {
		recs := make([]*kgo.Record, min(10000, b.N-from))
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "bench", Partition: int32((from + i) % 3), Value: value}
		}
		produce(b, cl, recs...)
	}
	s := newTestSource(b, c, "g", nil, "bench")
	runtest.WaitFor(b, "the first fetch", func() bool { return buffered(s) > 0 }, runtest.Within(10*time.Second))
	ctx := context.Background()
	buf := make([]isb.ReadMessage, 500)
	b.ReportAllocs()
	b.ResetTimer()
	for read := 0; read < b.N; {
		n, err := s.Read(ctx, buf[:min(len(buf), b.N-read)])
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Ack(ctx, buf[:n]); err != nil {
			b.Fatal(err)
		}
		read += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkSinkWrite writes b.N messages of 100 bytes with a key and a header,
// to 3 partitions, in batches of 500.
func BenchmarkSinkWrite(b *testing.B) {
	c := newCluster(b, kfake.SeedTopics(3, "bench"))
	s := newTestSink(b, c.ListenAddrs(), "bench", true, nil)
	msgs := make([]isb.Message, 500)
	value := bytes.Repeat([]byte("v"), 100)
	for i := range msgs {
		msgs[i] = isb.Message{Keys: []string{string(rune('a' + i%26))}, Value: value, Headers: map[string]string{"h": "x"}}
	}
	errs := make([]error, len(msgs))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for written := 0; written < b.N; {
		n := min(len(msgs), b.N-written)
		if err := s.Write(ctx, msgs[:n], errs[:n]); err != nil {
			b.Fatal(err)
		}
		for _, err := range errs[:n] {
			if err != nil {
				b.Fatal(err)
			}
		}
		written += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
