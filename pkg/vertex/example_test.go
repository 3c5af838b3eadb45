package vertex_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// A vertex built from Go values, without YAML: a generator, the built-in cat
// and a blackhole sink, at most 100 messages a second.
func Example() {
	// A clock that moves only when told keeps this example's output exact;
	// without WithClock the vertex runs on the wall clock.
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	spec := vertex.Spec{
		Name: "embedded",
		Limits: vertex.Limits{ReadBatchSize: 500, ReadTimeout: time.Second,
			RateLimit: &vertex.RateLimit{Config: ratelimit.Config{Max: 100, Min: 100}}},
		Source: func(env vertex.Env) (isb.Reader, error) {
			return source.NewGenerator(source.GeneratorConfig{RPU: 1000, Duration: time.Second, MsgSize: 8,
				Vertex: env.Name, Replica: env.Replica, ReadTimeout: env.Limits.ReadTimeout, Clock: env.Clock})
		},
		Map:  func(env vertex.Env) (udf.Mapper, error) { return udf.NewBuiltin("cat", nil, env.Log) },
		Sink: func(vertex.Env) (isb.Writer, error) { return sink.Blackhole{}, nil },
	}
	v, err := vertex.New(spec, vertex.WithClock(clk))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()

	// Each epoch's share goes at once; then the vertex waits for the next.
	for epoch := 1; epoch <= 2; epoch++ {
		for !v.Status().Throttled || v.Status().WriteTotal < float64(100*epoch) {
			time.Sleep(time.Millisecond)
		}
		s := v.Status()
		fmt.Printf("epoch %d: wrote %v in all, share %d, then %v\n", epoch, s.WriteTotal, s.Share, s.Reasons)
		clk.Advance(time.Second)
	}

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// epoch 1: wrote 100 in all, share 100, then [rate_limited]
	// epoch 2: wrote 200 in all, share 100, then [rate_limited]
}
