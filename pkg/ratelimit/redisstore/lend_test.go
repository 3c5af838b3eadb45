package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// TestSpareAsTheGoStoreDoes runs lends of three regions through the script
// and through share.Spare, the reference, and checks that each is granted the
// same. A lend is applied at the store's time, so one that the epoch's end
// overtakes is dropped by both.
func TestSpareAsTheGoStoreDoes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	stores := map[string]*redisstore.Store{}
	for _, r := range []string{"eu", "us", "ap"} {
		stores[r] = newStore(t, srv, "mv", redisstore.Options{Region: r})
	}
	ctx := context.Background()
	v, err := stores["eu"].Sync(ctx, share.Report{ID: "eu-0"})
	if err != nil {
		t.Fatal(err)
	}
	e := v.Time.Unix()
	var ref share.Spare
	for i, l := range []share.Lend{
		{Epoch: e, Give: 40, Region: "us"},
		{Epoch: e, Give: 10, Region: "ap"},
		{Epoch: e, Want: 5, Region: "ap"}, // its own first
		{Epoch: e, Give: 3, Want: 0, Region: "eu"},
		{Epoch: e, Want: 20, Region: "eu"},             // its own 3, then the fullest: us
		{Epoch: e, Want: 30, Region: "ap"},             // its own 5, then us 20, then eu 0
		{Epoch: e - 1, Give: 7, Want: 9, Region: "eu"}, // of an epoch gone: nothing
		{Epoch: e, Want: 100, Region: "us"},
	} {
		v, err := stores[l.Region].Sync(ctx, share.Report{ID: fmt.Sprint(l.Region, "-", i), Lend: &l})
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.Apply(l, v.Time); v.Lent != want {
			t.Fatalf("lend %d %+v: lent %d; want %d as share.Spare grants", i, l, v.Lent, want)
		}
	}
	if keys := stores["us"].Keys(); keys[0] != "sluice:{mv}:region:us:heartbeats" || keys[6] != "sluice:{mv}:spare" {
		t.Errorf("keys of region us: %v", keys)
	}
}

// TestRegionsLendThroughRedisCluster runs two regions of two replicas each,
// one busy and one idle, on the real clock, on a Redis Cluster (where the
// regions' keys and the spare share one slot; TestRegionsTable runs on one
// server): no epoch grants more than max, and the busy region takes most of
// the idle one's proportion.
func TestRegionsLendThroughRedisCluster(t *testing.T) {
	for _, m := range storeModes {
		if m.name == "cluster" {
			testRegionsLend(t, m.start(t))
		}
	}
}

func testRegionsLend(t *testing.T, d deployment) {
	const max = 1000
	var mu sync.Mutex
	byEpoch := map[int64]map[string]int64{}
	cfg := ratelimit.Config{Max: max / 2, Min: max / 2, Lend: true, ReservePercentage: 10}
	ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var limiters []*ratelimit.Limiter
	for _, id := range []string{"eu-1", "eu-2", "us-1", "us-2"} {
		region := id[:2]
		l, err := ratelimit.New(cfg, ratelimit.WithStore(d.store(t, "regions", redisstore.Options{Region: region})),
			ratelimit.WithReplicaID(id), ratelimit.WithRegion(region))
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
		if region == "us" {
			continue // idle
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				g, err := l.Acquire(ctx, 10)
				if err == nil && g.Tokens > 0 {
					mu.Lock()
					if byEpoch[g.Epoch()] == nil {
						byEpoch[g.Epoch()] = map[string]int64{}
					}
					byEpoch[g.Epoch()][region] += int64(g.Tokens)
					mu.Unlock()
				}
			}
		})
	}
	// lending counts the epochs in which the busy region took 85% of the
	// whole, the one under way included: it can only grow.
	lending := func(report bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for e, by := range byEpoch {
			if g := by["eu"] + by["us"]; report && g > max {
				t.Errorf("epoch %d granted %d (%v); max %d", e, g, by, max)
			}
			if by["eu"] >= 850 {
				n++
			}
		}
		return n
	}
	runtest.WaitFor(t, "two epochs of the busy region taking 85%", func() bool { return lending(false) >= 2 },
		runtest.Within(shareTimeout), runtest.Every(100*time.Millisecond), runtest.Soft())
	cancel()
	wg.Wait()
	for _, l := range limiters {
		l.Close(context.Background())
	}
	if n := lending(true); n < 2 {
		t.Errorf("in %v, the busy region took 85%% of the whole in %d epochs; want 2 or more: %v", shareTimeout, n, byEpoch)
	}
}
