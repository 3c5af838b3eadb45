package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
)

// A reader takes a batch's worth of tokens, reads at most that many messages, and
// gives back what it did not use.
func Example() {
	cfg := ratelimit.DefaultConfig(100) // 100 per second, from 1 over 1s, relaxed
	cfg.RampUpDuration = 0              // no ramp: 100 per second from the start
	l, err := ratelimit.New(cfg)
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	ctx := context.Background()
	g, err := l.Acquire(ctx, 64)
	if err != nil {
		panic(err)
	}
	read := min(g.Tokens, 40) // the source had only 40 messages
	l.Settle(g, read)         // keeps read tokens, gives the others back
	fmt.Println("granted", g.Tokens, "used", read)
	// Output: granted 64 used 40
}

// With a deadline before the next epoch, Acquire fails fast with a rate-limit
// error that says how long to wait.
func ExampleLimiter_Acquire() {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	l, _ := ratelimit.New(ratelimit.Config{Max: 10}, ratelimit.WithClock(clk))
	defer l.Close(context.Background())

	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(300*time.Millisecond))
	defer cancel()
	g, _ := l.Acquire(ctx, 25)
	fmt.Println("first call:", g.Tokens)

	clk.Advance(400 * time.Millisecond)
	_, err := l.Acquire(ctx, 1)
	var te *ratelimit.ThrottledError
	fmt.Println(errors.Is(err, ratelimit.ErrRateLimited), errors.As(err, &te), te.Wait)
	// Output:
	// first call: 10
	// true true 600ms
}

// TryAcquire never waits: it takes what is left of the epoch's share, or says why
// there is nothing to take.
func ExampleLimiter_TryAcquire() {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	l, _ := ratelimit.New(ratelimit.Config{Max: 10}, ratelimit.WithClock(clk))
	defer l.Close(context.Background())

	g, reason := l.TryAcquire(8)
	fmt.Println(g.Tokens, reason)
	g, reason = l.TryAcquire(8)
	fmt.Println(g.Tokens, reason)
	g, reason = l.TryAcquire(8)
	fmt.Println(g.Tokens, reason)
	// Output:
	// 8 none
	// 2 none
	// 0 rate_limited
}

// Three replicas share one limit through a store; the shares sum to the pool.
func ExampleWithStore() {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	store := memstore.New(clk)
	var replicas []*ratelimit.Limiter
	for _, id := range []string{"a", "b", "c"} {
		l, _ := ratelimit.New(ratelimit.Config{Max: 10, Min: 10},
			ratelimit.WithClock(clk), ratelimit.WithStore(store), ratelimit.WithReplicaID(id))
		defer l.Close(context.Background())
		replicas = append(replicas, l)
	}
	clk.Advance(3 * time.Second) // syncs every 100ms; the three agree on who they are

	for _, l := range replicas {
		s := l.Status()
		fmt.Printf("rank %d of %d: share %d\n", s.Rank, s.Replicas, s.Share)
	}
	// Output:
	// rank 0 of 3: share 4
	// rank 1 of 3: share 3
	// rank 2 of 3: share 3
}
