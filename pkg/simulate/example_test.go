package simulate_test

import (
	"os"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/simulate"
)

// A limit that ramps from 10 to 40 tokens a second over 3s, asked for 100 a
// second, with an epoch without a call: the pool does not move in it.
func ExampleSimulation_Write() {
	cfg := ratelimit.DefaultConfig(40)
	cfg.Min, cfg.RampUpDuration = 10, 3*time.Second
	demand, err := simulate.ParseDemand("100,100,,100,100")
	if err != nil {
		panic(err)
	}
	sim := simulate.Simulation{Config: cfg, Scenario: ratelimit.Scenario{Demand: demand}}
	if err := sim.Write(os.Stdout, simulate.CSV, nil); err != nil {
		panic(err)
	}
	// Output:
	// epoch,pool,granted
	// 1,10,10
	// 2,20,20
	// 3,,
	// 4,30,30
	// 5,40,40
}
