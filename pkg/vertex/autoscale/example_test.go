package autoscale_test

import (
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale"
)

// A vertex whose replicas process 200 messages a second each, with a
// backlog far beyond them, gets the replicas its pool of 500 a second keeps
// busy, and no more.
func Example() {
	cfg := autoscale.DefaultConfig()
	cfg.Min, cfg.Max, cfg.ReplicaRate = 1, 10, 200
	cfg.ScaleUpCooldown, cfg.Lookback = 0, time.Second
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	s, err := autoscale.New(cfg, autoscale.WithClock(clk))
	if err != nil {
		panic(err)
	}
	replicas := 1
	for range 3 {
		d := s.Decide(autoscale.Observation{Replicas: replicas, Pending: 50_000, Rate: 200,
			Limits: []autoscale.Limit{{Pool: 500, Max: 500}}})
		fmt.Println(d.Replicas, d.Reason)
		replicas = d.Replicas
		clk.Advance(time.Second)
	}
	// Output:
	// 3 atLimit
	// 3 atLimit
	// 3 atLimit
}
