package simulate_test

import (
	"fmt"
	"os"
	"time"

	"github.com/sluiceflow/sluice/internal/simulate"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
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
	sim := simulate.Simulation{Config: cfg, Scenario: simulate.Scenario{Demand: demand}}
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

// Simulate shows a ramp epoch by epoch, as `vertex simulate` does.
func ExampleSimulate() {
	cfg := ratelimit.Config{Max: 50, Min: 10, RampUpDuration: 4 * time.Second, Mode: ratelimit.OnlyIfUsed, ThresholdPercentage: 100}
	epochs, _ := simulate.Simulate(cfg, simulate.Scenario{Demand: []int{10, 5, 20, simulate.NoCall, 30}})
	for _, e := range epochs {
		if e.Called {
			fmt.Printf("epoch %d: pool %.0f, granted %d\n", e.Epoch, float64(e.PoolMilli)/1000, e.Granted)
		}
	}
	// Output:
	// epoch 1: pool 10, granted 10
	// epoch 2: pool 20, granted 5
	// epoch 3: pool 20, granted 20
	// epoch 5: pool 30, granted 30
}
