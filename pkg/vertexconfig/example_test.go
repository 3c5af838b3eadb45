package vertexconfig_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// A MonoVertex config run inside a Go program: a generator, the built-in cat
// and a blackhole sink, at most 100 messages a second.
func ExampleFromMonoVertex() {
	f, err := vertexconfig.Parse([]byte(`
apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: embedded
spec:
  limits:
    rateLimit:
      max: 100
      min: 100
      rampUpDuration: 0s
  source:
    generator:
      rpu: 1000
  udf:
    builtin:
      name: cat
  sink:
    blackhole: {}
`))
	if err != nil {
		log.Fatal(err)
	}
	// A clock that moves only when told keeps this example's output exact;
	// without WithClock the vertex runs on the wall clock.
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	v, err := vertex.New(vertexconfig.FromMonoVertex(f.MonoVertex), vertex.WithClock(clk))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()

	// Each epoch's share goes at once; then the vertex waits for the next.
	for epoch := 1; epoch <= 2; epoch++ {
		s := v.Status()
		for !s.Throttled || s.WriteTotal < float64(100*epoch) {
			time.Sleep(time.Millisecond)
			s = v.Status() // one snapshot, so what is printed is what was waited for
		}
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
