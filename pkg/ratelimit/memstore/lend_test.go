package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
)

// regionsUnderTest is two regions of one limit, two replicas each, on one
// manual clock: each region's pool is half of max, and they lend to each
// other through the spare the regions' stores share.
type regionsUnderTest struct {
	t    *testing.T
	clk  *clock.Manual
	reps map[string]*ratelimit.Limiter
	link map[string]*cuttable
	// region of each replica, and the tokens granted per epoch per region.
	region map[string]string
	used   map[int64]map[string]int64
}

func newRegions(t *testing.T, max int64, reserve int) *regionsUnderTest {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	root := memstore.New(clk)
	r := &regionsUnderTest{t: t, clk: clk, reps: map[string]*ratelimit.Limiter{}, link: map[string]*cuttable{},
		region: map[string]string{}, used: map[int64]map[string]int64{}}
	cfg := ratelimit.Config{Max: max / 2, Min: max / 2, Lend: true, ReservePercentage: reserve}
	for _, id := range []string{"eu-1", "eu-2", "us-1", "us-2"} {
		region := id[:2]
		link := &cuttable{Store: root.Region(region)}
		l, err := ratelimit.New(cfg, ratelimit.WithClock(clk), ratelimit.WithStore(link),
			ratelimit.WithReplicaID(id), ratelimit.WithRegion(region))
		if err != nil {
			t.Fatal(err)
		}
		r.reps[id], r.link[id], r.region[id] = l, link, region
	}
	t.Cleanup(func() {
		for _, l := range r.reps {
			l.Close(context.Background())
		}
	})
	return r
}

// step has the replicas of the busy regions take all they can, then moves
// the clock on by a sync interval.
func (r *regionsUnderTest) step(busy map[string]bool) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for id, l := range r.reps {
		if !busy[r.region[id]] {
			continue
		}
		g, err := l.Acquire(ctx, 1_000_000)
		if err != nil && !errors.Is(err, ratelimit.ErrRateLimited) {
			r.t.Fatalf("%s: %v", id, err)
		}
		if g.Tokens > 0 {
			if r.used[g.Epoch()] == nil {
				r.used[g.Epoch()] = map[string]int64{}
			}
			r.used[g.Epoch()][r.region[id]] += int64(g.Tokens)
		}
	}
	r.clk.Advance(ratelimit.DefaultSyncInterval)
}

// run steps through whole epochs, from the start of one, and returns the
// first epoch it ran.
func (r *regionsUnderTest) run(epochs int, busy map[string]bool) int64 {
	first := r.clk.Now().Unix()
	for range epochs * int(time.Second/ratelimit.DefaultSyncInterval) {
		r.step(busy)
	}
	return first
}

func (r *regionsUnderTest) total(e int64) int64 { return r.used[e]["eu"] + r.used[e]["us"] }

func TestRegionsLendIdleTokens(t *testing.T) {
	r := newRegions(t, 100, 10)
	r.run(3, map[string]bool{"eu": true, "us": true})
	both := r.run(3, map[string]bool{"eu": true, "us": true})
	idle := r.run(5, map[string]bool{"eu": true})
	back := r.run(3, map[string]bool{"eu": true, "us": true})
	for e := both; e < back+3; e++ {
		t.Logf("epoch %d: %v", e, r.used[e])
	}
	for e, by := range r.used {
		if n := by["eu"] + by["us"]; n > 100 {
			t.Fatalf("epoch %d granted %d (%v); max 100", e, n, by)
		}
	}
	for e := both; e < both+2; e++ {
		if r.used[e]["eu"] != 50 || r.used[e]["us"] != 50 {
			t.Errorf("both busy, epoch %d: %v; want 50 each", e, r.used[e])
		}
	}
	// us idle: its replicas lend 90% of their shares at their first sync of
	// each epoch, which eu's replicas take.
	for e := idle + 1; e < idle+4; e++ {
		if got := r.used[e]["eu"]; got < 90 {
			t.Errorf("us idle, epoch %d: eu took %d; want at least 90 of the 100", e, got)
		}
	}
	for e := back + 1; e < back+3; e++ {
		if r.used[e]["us"] < 45 || r.total(e) > 100 {
			t.Errorf("both busy again, epoch %d: %v; want us back to its share", e, r.used[e])
		}
	}
	if s := r.reps["us-1"].Status(); s.Lent == 0 {
		t.Errorf("us-1 lent nothing: %+v", s)
	}
}

// TestRegionsPartitioned cuts one region off the shared spare: each region
// keeps its own proportion, and no epoch goes over max.
func TestRegionsPartitioned(t *testing.T) {
	r := newRegions(t, 100, 0)
	r.run(3, map[string]bool{"eu": true})
	for _, id := range []string{"us-1", "us-2"} {
		r.link[id].cut.Store(true)
	}
	cut := r.run(5, map[string]bool{"eu": true, "us": true})
	for e, by := range r.used {
		if n := by["eu"] + by["us"]; n > 100 {
			t.Fatalf("epoch %d granted %d (%v); max 100", e, n, by)
		}
	}
	for e := cut + 1; e < cut+4; e++ {
		if r.used[e]["eu"] != 50 {
			t.Errorf("partitioned, epoch %d: eu took %d; want its 50", e, r.used[e]["eu"])
		}
	}
}
