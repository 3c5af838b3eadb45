package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// TestGroupOfTwoVertices runs three replicas of each of two vertices, each
// vertex limited to 400/s and both in a group of 500/s, through Redis: a
// replica takes its vertex's tokens, then the group's for them, and gives
// back to its vertex what the group refused. No epoch goes over the group's
// max, and neither vertex over its own; the test runs until the group has
// been used to 90% in two epochs (within shareTimeout).
func TestGroupOfTwoVertices(t *testing.T) { forEachMode(t, testGroupOfTwoVertices) }

func testGroupOfTwoVertices(t *testing.T, d deployment) {
	const vertexMax, groupMax = 400, 500
	var mu sync.Mutex
	sent := map[int64]map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var limiters []*ratelimit.Limiter
	newLimiter := func(cfg ratelimit.Config, prefix, id string) *ratelimit.Limiter {
		l, err := ratelimit.New(cfg, ratelimit.WithStore(d.store(t, prefix, redisstore.Options{})),
			ratelimit.WithReplicaID(id), ratelimit.WithSyncInterval(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
		return l
	}
	for _, vertex := range []string{"orders", "refunds"} {
		for i := range 3 {
			id := fmt.Sprint(vertex, "-", i)
			own := newLimiter(ratelimit.Config{Max: vertexMax, Min: vertexMax}, vertex, id)
			group := newLimiter(ratelimit.Config{Max: groupMax, Min: groupMax, Lend: true, ReservePercentage: 10}, "group-partner-api", id)
			wg.Go(func() {
				for ctx.Err() == nil {
					g, err := own.Acquire(ctx, 10)
					if err != nil || g.Tokens == 0 {
						continue
					}
					gg, err := group.Acquire(ctx, g.Tokens)
					own.Settle(g, gg.Tokens)
					if err != nil || gg.Tokens == 0 {
						continue
					}
					// Each limit's tokens count in the epoch that granted
					// them (a wait for the group may cross a boundary).
					mu.Lock()
					for _, c := range []struct {
						e    int64
						name string
					}{{g.Epoch(), vertex}, {gg.Epoch(), "group"}} {
						if sent[c.e] == nil {
							sent[c.e] = map[string]int64{}
						}
						sent[c.e][c.name] += int64(gg.Tokens)
					}
					mu.Unlock()
				}
			})
		}
	}
	// full counts the epochs that used the group to 90%, the one under
	// way included: it can only grow.
	full := func(report bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for e, by := range sent {
			if report && (by["orders"] > vertexMax || by["refunds"] > vertexMax) {
				t.Errorf("epoch %d: %v; each vertex at most %d", e, by, vertexMax)
			}
			if g := by["group"]; report && g > groupMax {
				t.Errorf("epoch %d: %v; the group at most %d", e, by, groupMax)
			} else if g >= groupMax*9/10 {
				n++
			}
		}
		return n
	}
	runtest.WaitFor(t, "two epochs of the group at 90% of its max", func() bool { return full(false) >= 2 },
		runtest.Within(shareTimeout), runtest.Every(100*time.Millisecond), runtest.Soft())
	cancel()
	wg.Wait()
	for _, l := range limiters {
		l.Close(context.Background())
	}
	if n := full(true); n < 2 {
		t.Errorf("in %v, the group was used to 90%% in %d epochs; want 2 or more: %v", shareTimeout, n, sent)
	}
}
