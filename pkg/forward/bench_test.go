package forward

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/internal/expr"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// BenchmarkForwardCycle is one forward iteration of a batch of 500 (generator →
// cat → blackhole): with the no-op limiter a vertex without a rate limit uses,
// with a rate limiter far above capacity, and with
// that and a per-key limit far above capacity too, counted in this process,
// over 10 or 1,000 keys; and with a rate limiter and a byte limit far above
// capacity, or a cost of the payload's length alone. Divide ns/op by 500 for
// the cost per message.
func BenchmarkForwardCycle(b *testing.B) {
	rateLimiter := func(b *testing.B) throttle.Limiter {
		l, err := ratelimit.New(ratelimit.Config{Max: ratelimit.MaxTokens})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close(context.Background()) })
		return l
	}
	for _, tt := range []struct {
		name    string
		limiter func(b *testing.B) throttle.Limiter
		keys    int  // of the messages, round robin
		perKey  bool // a per-key limit
		bytes   bool // a byte limit far above capacity
		cost    bool // a cost of len(payload)/1000000, 1 a message
	}{
		{"noop-limiter", func(*testing.B) throttle.Limiter { return throttle.Noop{} }, 0, false, false, false},
		{"rate-limiter", rateLimiter, 0, false, false, false},
		{"rate-limiter-10-keys", rateLimiter, 10, false, false, false},
		{"perkey-10-keys", rateLimiter, 10, true, false, false},
		{"rate-limiter-1000-keys", rateLimiter, 1000, false, false, false},
		{"perkey-1000-keys", rateLimiter, 1000, true, false, false},
		{"bytes", rateLimiter, 0, false, true, false},
		{"cost", rateLimiter, 0, false, false, true},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var keys []string
			for i := range tt.keys {
				keys = append(keys, "key-"+strconv.Itoa(i))
			}
			gen, err := source.NewGenerator(source.GeneratorConfig{RPU: 1 << 40, Duration: 1 << 30, MsgSize: 8, Vertex: "bench", Keys: keys})
			if err != nil {
				b.Fatal(err)
			}
			var pk *throttle.PerKey
			if tt.perKey {
				kl, err := ratelimit.NewKeyLimiter(ratelimit.KeyConfig{Max: ratelimit.MaxTokens})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { kl.Close() })
				pk = &throttle.PerKey{Limiter: kl}
			}
			tr := NewTracker(nil)
			d := Deps{Reader: gen, Mapper: udf.Cat{}, Sink: sink.Blackhole{}, Metrics: NewMetrics(prometheus.NewRegistry(), tr), Tracker: tr, Throttle: &throttle.Throttle{Limiter: tt.limiter(b), PerKey: pk}}
			if tt.bytes {
				d.Throttle.Bytes = rateLimiter(b)
			}
			if tt.cost {
				c, err := expr.CompileCost("len(payload) / 1000000")
				if err != nil {
					b.Fatal(err)
				}
				d.Throttle.Cost = func(m *isb.Message) (int, error) {
					n, err := c.Of(m.Value, m.Headers, m.Keys)
					return int(n), err
				}
			}
			f, err := New(d, Options{BatchSize: 500})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			l, stop := f.newLoop(ctx)
			defer stop()
			b.ReportAllocs()
			for b.Loop() {
				if err := l.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/msg")
		})
	}
}
