package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/sink"
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
