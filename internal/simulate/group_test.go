package simulate_test

import (
	"testing"

	"github.com/sluiceflow/sluice/internal/simulate"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// TestSimulateGroup runs two vertices in a group of 100/s, each allowed 80/s
// of its own: while one is idle the other takes its own max out of the
// group, and no epoch sends more than the group's max.
func TestSimulateGroup(t *testing.T) {
	idle := []int{simulate.NoCall, simulate.NoCall, simulate.NoCall, simulate.NoCall, simulate.NoCall, 80, 80, 80, 80}
	busy := []int{80, 80, 80, 80, 80, 80, 80, 80, 80}
	epochs, err := simulate.SimulateGroup(ratelimit.Config{Max: 100, Min: 100},
		[]simulate.SimMember{{Name: "orders", Config: ratelimit.Config{Max: 80, Min: 80}, Demand: busy},
			{Name: "refunds", Config: ratelimit.Config{Max: 80, Min: 80}, Demand: idle}}, len(busy))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range epochs {
		t.Logf("%+v", e)
		if e.Sent[0]+e.Sent[1] > 100 {
			t.Errorf("epoch %d sent %v; group max 100", e.Epoch, e.Sent)
		}
	}
	for _, e := range epochs[2:5] {
		if e.Sent[0] != 80 {
			t.Errorf("epoch %d: orders sent %d alone in the group; want its own max 80", e.Epoch, e.Sent[0])
		}
	}
	for _, e := range epochs[6:] {
		if e.Sent[0] != 50 || e.Sent[1] != 50 {
			t.Errorf("epoch %d: both busy sent %v; want the group's 100 split 50/50", e.Epoch, e.Sent)
		}
	}
}
