package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/internal/faultproxy"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// TestRegionsTable runs a limit of 1000/s split between two regions of two
// replicas each, eu and us, 50 each, sharing one Redis; us reaches it
// through a proxy. Phase by phase: both busy, us idle, both busy again, us
// cut off from the store (a partition; us keeps its last pool, as
// onStoreFailure lastKnown does), and healed. It prints what each region
// took per epoch and checks that no epoch went over max, partition
// included: each region's pool is its proportion, so a partition costs the
// lending and nothing else.
func TestRegionsTable(t *testing.T) {
	const limit = 1000
	srv := redistest.Start(t, redistest.Options{})
	proxy := faultproxy.New(t, srv.Addr)
	cfg := ratelimit.Config{Max: limit / 2, Min: limit / 2, Lend: true, ReservePercentage: 10}

	var mu sync.Mutex
	took := map[int64]map[string]int64{}
	busy := map[string]bool{"eu": true, "us": true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var limiters []*ratelimit.Limiter
	for _, id := range []string{"eu-1", "eu-2", "us-1", "us-2"} {
		region := id[:2]
		opts := srv.ClientOptions()
		if region == "us" {
			opts.Addr = proxy.Addr()
		}
		opts.MaxRetries, opts.DialTimeout, opts.ReadTimeout = -1, 200*time.Millisecond, 200*time.Millisecond
		client := redis.NewClient(opts)
		t.Cleanup(func() { client.Close() })
		store, err := redisstore.New(client, "regions", redisstore.Options{Region: region})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ratelimit.New(cfg, ratelimit.WithStore(store), ratelimit.WithReplicaID(id), ratelimit.WithRegion(region))
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				on := busy[region]
				mu.Unlock()
				if !on {
					time.Sleep(10 * time.Millisecond) // an idle replica: no calls
					continue
				}
				g, err := l.Acquire(ctx, 10)
				if err == nil && g.Tokens > 0 {
					mu.Lock()
					if took[g.Epoch()] == nil {
						took[g.Epoch()] = map[string]int64{}
					}
					took[g.Epoch()][region] += int64(g.Tokens)
					mu.Unlock()
				}
			}
		})
	}
	type phase struct {
		name  string
		epoch int64
	}
	var phases []phase
	// Each phase starts at an epoch's start and lasts until a second and a
	// half into its third epoch, or, with until, until then and until until
	// holds of the epochs after its first (within shareTimeout).
	at := func(name string, f func(), until func(from int64) bool) {
		_, left := limiters[0].Epoch()
		time.Sleep(left)
		mu.Lock()
		f()
		mu.Unlock()
		e, left := limiters[0].Epoch()
		phases = append(phases, phase{name, e})
		time.Sleep(left + 1500*time.Millisecond)
		if until != nil {
			runtest.WaitFor(t, name+" to hold", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return until(e + 1)
			}, runtest.Within(shareTimeout), runtest.Every(100*time.Millisecond), runtest.Soft())
		}
	}
	// lent reports whether eu took 85% of max, its own proportion and most
	// of the idle us's, in an epoch from from on.
	lent := func(from int64) bool {
		for e, by := range took {
			if e >= from && by["eu"] >= 850 {
				return true
			}
		}
		return false
	}
	at("both busy", func() {}, nil)
	at("us idle", func() { busy["us"] = false }, lent)
	at("both busy", func() { busy["us"] = true }, nil)
	at("us cut off", proxy.Cut, nil)
	at("healed", proxy.Heal, nil)
	cancel()
	wg.Wait()
	for _, l := range limiters {
		l.Close(context.Background())
	}

	epochs := slices.Sorted(func(yield func(int64) bool) {
		for e := range took {
			if !yield(e) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %6s %6s %6s %6s\n", "phase", "epoch", "eu", "us", "sum")
	overshoot := int64(0)
	last := phases[len(phases)-1].epoch + 2
	for _, e := range epochs {
		if e < phases[0].epoch || e > last {
			continue
		}
		name := ""
		for _, p := range phases {
			if e >= p.epoch {
				name = p.name
			}
		}
		eu, us := took[e]["eu"], took[e]["us"]
		fmt.Fprintf(&b, "%-12s %6d %6d %6d %6d\n", name, e-phases[0].epoch+1, eu, us, eu+us)
		overshoot = max(overshoot, eu+us-limit)
	}
	t.Logf("max %d, two regions of 50%% (500/s), reserve 10%%:\n%s", limit, b.String())
	if overshoot > 0 {
		t.Errorf("an epoch went over max by %d", overshoot)
	}
	// Settled epochs of each phase: from its second.
	settled := func(p int) []int64 {
		var es []int64
		end := int64(1 << 62)
		if p+1 < len(phases) {
			end = phases[p+1].epoch
		}
		for e := phases[p].epoch + 1; e < end && e <= last; e++ {
			es = append(es, e)
		}
		return es
	}
	// Lending is asked of one epoch of the idle phase, not of each: a
	// replica that the machine does not run for part of a second takes less
	// of that second's tokens, which is no fault of the limiter.
	if lending := slices.ContainsFunc(settled(1), func(e int64) bool { return took[e]["eu"] >= 850 }); !lending {
		t.Errorf("us idle, epochs %v: eu never took 85%% of max", settled(1))
	}
	for _, e := range settled(3) {
		if took[e]["eu"] > limit/2 {
			t.Errorf("us cut off, epoch %d: eu took %d, more than its proportion", e, took[e]["eu"])
		}
	}
}
