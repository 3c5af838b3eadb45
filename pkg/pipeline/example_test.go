package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/sink"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// A three-vertex pipeline in one process, its source at most 10 messages a
// second: when it stops, what the source read has reached the sink.
func Example() {
	f, err := vertexconfig.Parse([]byte(`
apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: example
spec:
  vertices:
    - name: in
      source:
        generator:
          rpu: 100
      limits:
        rateLimit:
          max: 10
          min: 10
          rampUpDuration: 0s
    - name: cat
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`))
	if err != nil {
		log.Fatal(err)
	}
	// A clock that moves only when told keeps the rate limit's epochs still.
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	p, err := pipeline.NewFromConfig(context.Background(), f.Pipeline,
		pipeline.WithVertexOptions(vertex.WithClock(clk), vertex.WithLogSink(sink.NewLog(io.Discard))))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for !p.Status()[0].Throttled { // the source has used its share
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	for _, s := range p.Status() {
		fmt.Printf("%s: read %v, wrote %v\n", s.Vertex, s.ReadTotal, s.WriteTotal)
	}
	// Output:
	// in: read 10, wrote 10
	// cat: read 10, wrote 10
	// out: read 10, wrote 10
}

// A three-vertex pipeline declared in Go, without YAML, its source at most
// 10 messages a second: when it stops, what the source read has reached the
// sink.
func ExampleNew() {
	limits := vertex.Limits{ReadBatchSize: 500, ReadTimeout: 10 * time.Millisecond}
	in := limits
	in.RateLimit = &vertex.RateLimit{Config: ratelimit.Config{Max: 10, Min: 10}}
	spec := pipeline.Spec{
		Name: "example",
		Vertices: []pipeline.Vertex{
			{Name: "in", Spec: vertex.Spec{Name: "in", Limits: in, Source: func(env vertex.Env) (isb.Reader, error) {
				return source.NewGenerator(source.GeneratorConfig{RPU: 100, Duration: time.Second, MsgSize: 8,
					Vertex: env.Name, Replica: env.Replica, ReadTimeout: env.Limits.ReadTimeout, Clock: env.Clock})
			}}},
			{Name: "cat", Spec: vertex.Spec{Name: "cat", Limits: limits,
				Map: func(env vertex.Env) (udf.Mapper, error) { return udf.NewBuiltin("cat", nil, env.Log) }}},
			{Name: "out", Spec: vertex.Spec{Name: "out", Limits: limits,
				Sink: func(vertex.Env) (isb.Writer, error) { return sink.Blackhole{}, nil }}},
		},
		Edges: []pipeline.Edge{{From: "in", To: "cat"}, {From: "cat", To: "out"}},
	}
	// A clock that moves only when told keeps the rate limit's epochs still.
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	p, err := pipeline.New(context.Background(), spec,
		pipeline.WithVertexOptions(vertex.WithClock(clk), vertex.WithLogSink(sink.NewLog(io.Discard))))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for !p.Status()[0].Throttled { // the source has used its share
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	for _, s := range p.Status() {
		fmt.Printf("%s: read %v, wrote %v\n", s.Vertex, s.ReadTotal, s.WriteTotal)
	}
	// Output:
	// in: read 10, wrote 10
	// cat: read 10, wrote 10
	// out: read 10, wrote 10
}
