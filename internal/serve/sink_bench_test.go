package serve

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// datum is a sinker.Datum of an isb.Message.
type datum struct{ m isb.Message }

func (d datum) ID() string                         { return d.m.ID }
func (d datum) Keys() []string                     { return d.m.Keys }
func (d datum) Value() []byte                      { return d.m.Value }
func (d datum) EventTime() time.Time               { return d.m.EventTime }
func (d datum) Watermark() time.Time               { return time.Time{} }
func (d datum) Headers() map[string]string         { return d.m.Headers }
func (d datum) UserMetadata() *sinker.UserMetadata { return sinker.NewUserMetadata() }

// countingSink takes every message and counts it.
type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	for i := range errs {
		errs[i] = nil
	}
	c.n.Add(int64(len(msgs)))
	return nil
}

// BenchmarkSinkServe measures, side by side in one run, what a message
// costs on its way to the same sink writer: called directly (builtin, the
// call sluice's forwarder makes), through the served vertex without the
// socket (vertex: its batch source, forwarder and acks), and through the
// sink role (served: sluice's UD sink client, the gRPC stream on a unix
// socket, the served vertex), one message a batch (unary) and 100
// (batch100). ns/op is per message.
//
//	go test -run '^$' -bench BenchmarkSinkServe -benchtime 3s ./internal/serve/
func BenchmarkSinkServe(b *testing.B) {
	for _, size := range []int{1, 100} {
		name := "unary"
		if size > 1 {
			name = fmt.Sprintf("batch%d", size)
		}
		msgs := batch("b", size)
		b.Run("builtin/"+name, func(b *testing.B) {
			w := &countingSink{}
			errs := make([]error, size)
			b.ResetTimer()
			for i := 0; i < b.N; i += size {
				if err := w.Write(context.Background(), msgs, errs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("vertex/"+name, func(b *testing.B) {
			w := &countingSink{}
			spec := vertex.Spec{Name: "bench", Limits: vertex.Limits{ReadBatchSize: size, ReadTimeout: 50 * time.Millisecond},
				Sink: func(vertex.Env) (isb.Writer, error) { return w, nil }}
			ctx, cancel := context.WithCancel(context.Background())
			sk := make(chan sinker.Sinker, 1)
			done := make(chan error, 1)
			go func() {
				done <- serveSinkWith(ctx, spec, Options{Log: zap.NewNop()}, 0, func(ctx context.Context, s sinker.Sinker) error {
					sk <- s
					<-ctx.Done()
					return nil
				})
			}()
			s := <-sk
			ds := make([]sinker.Datum, size)
			for i, m := range msgs {
				ds[i] = datum{m}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += size {
				ch := make(chan sinker.Datum, size)
				for _, d := range ds {
					ch <- d
				}
				close(ch)
				if r := s.Sink(context.Background(), ch); len(r) != size || !r[0].OK() {
					b.Fatalf("responses %v", r)
				}
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
		b.Run("served/"+name, func(b *testing.B) {
			w := &countingSink{}
			spec := vertex.Spec{Name: "bench", Limits: vertex.Limits{ReadBatchSize: size, ReadTimeout: 50 * time.Millisecond},
				Sink: func(vertex.Env) (isb.Writer, error) { return w, nil }}
			dir := b.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serveSink(ctx, spec, Options{SocketDir: dir, Log: zap.NewNop()}, 0) }()
			c := connect(b, dir)
			errs := make([]error, size)
			b.ResetTimer()
			for i := 0; i < b.N; i += size {
				if err := c.Write(context.Background(), msgs, errs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c.Close()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
