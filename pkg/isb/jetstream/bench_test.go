package jetstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// BenchmarkWriteReadAck moves batches of 500 small messages through one
// buffer: write, read (in reads of up to 500), ack; each message alone, and in
// frames of 64.
func BenchmarkWriteReadAck(b *testing.B) {
	const batch = 500
	for _, storage := range []Storage{FileStorage, MemoryStorage} {
		for _, frame := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/frame=%d", storage, frame), func(b *testing.B) {
				s := natstest.Start(b, natstest.Options{})
				c := connect(b, s, func(cfg *Config) { cfg.Storage = storage; cfg.Logger = nil; cfg.FrameSize = frame })
				sp := BufferSpec{Name: "bench-0", MaxLength: 10 * batch, UsageLimit: 80}
				if err := c.CreateBuffer(testCtx(b), sp); err != nil {
					b.Fatal(err)
				}
				w := newWriter(b, c, sp, "up")
				r := newReader(b, c, sp.Name, time.Second)
				msgs := make([]isb.Message, batch)
				for i := range msgs {
					msgs[i] = isb.Message{Keys: []string{"k"}, Value: []byte("a small payload of 32 bytes....."), EventTime: time.Now()}
				}
				errs := make([]error, batch)
				buf := make([]isb.ReadMessage, batch)
				ctx := testCtx(b)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					for j := range msgs {
						msgs[j].ID = fmt.Sprintf("%d-%d", i, j)
					}
					if err := w.Write(ctx, msgs, errs); err != nil {
						b.Fatal(err)
					}
					for j, err := range errs {
						if err != nil {
							b.Fatalf("message %d: %v", j, err)
						}
					}
					for got := 0; got < batch; {
						n, err := r.Read(ctx, buf[:batch-got])
						if err != nil {
							b.Fatal(err)
						}
						if err := r.Ack(ctx, buf[:n]); err != nil {
							b.Fatal(err)
						}
						got += n
					}
				}
				b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "msg/s")
			})
		}
	}
}
