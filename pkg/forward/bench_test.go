package forward

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/sink"
	"github.com/sluiceflow/sluice/pkg/source"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// BenchmarkForwardCycle is one forward iteration of a batch of 500 (generator →
// cat → blackhole): with no limiter call at all, with the no-op limiter a vertex
// without a rate limit uses, and with a rate limiter far above capacity. Divide
// ns/op by 500 for the cost per message.
func BenchmarkForwardCycle(b *testing.B) {
	for _, tt := range []struct {
		name    string
		limiter func(b *testing.B) Limiter
	}{
		{"no-limiter-call", func(*testing.B) Limiter { return nil }},
		{"noop-limiter", func(*testing.B) Limiter { return Noop{} }},
		{"rate-limiter", func(b *testing.B) Limiter {
			l, err := ratelimit.New(ratelimit.Config{Max: ratelimit.MaxTokens})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close(context.Background()) })
			return l
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			gen, err := source.NewGenerator(source.GeneratorConfig{RPU: 1 << 40, Duration: 1 << 30, MsgSize: 8, Vertex: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			tr := NewTracker(nil)
			f, err := New(Deps{Reader: gen, Mapper: udf.Cat{}, Sink: sink.Blackhole{}, Limiter: tt.limiter(b),
				Metrics: NewMetrics(prometheus.NewRegistry(), tr), Tracker: tr}, Options{BatchSize: 500})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			w := f.newWorker(f.d.Transformer, f.d.Mapper)
			w.read = make([]isb.ReadMessage, f.readSize())
			b.ReportAllocs()
			for b.Loop() {
				if err := w.forwardOnce(ctx, ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/msg")
		})
	}
}
