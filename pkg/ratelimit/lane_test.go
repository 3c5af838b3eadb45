package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLaneTokensStayAvailableToOthers(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 100})
	ctx := expired(t)
	ln := l.Lane()
	// The lane takes a chunk in advance and keeps what it did not grant.
	mustAcquire(t, l.Limiter, ctx, 0, 0)
	if n, _ := ln.Acquire(ctx, 10); n != 10 {
		t.Fatalf("lane got %d; want 10", n)
	}
	if s := l.Status(); s.Granted != 10 {
		t.Fatalf("granted %d; tokens a lane holds are not granted", s.Granted)
	}
	// Another caller still gets every token left, some of them from the lane.
	mustAcquire(t, l.Limiter, ctx, 1000, 90)
	if n, err := ln.Acquire(ctx, 1); n != 0 || !errors.Is(err, ErrRateLimited) {
		t.Fatalf("lane after the share is gone: %d, %v", n, err)
	}
	// Deposits through a lane go back to the lane and count for the epoch.
	ln.Deposit(5)
	if s := l.Status(); s.Granted != 95 {
		t.Fatalf("granted %d after a lane deposit of 5; want 95", s.Granted)
	}
	mustAcquire(t, l.Limiter, ctx, 1000, 5)
	l.clk.Advance(time.Second)
	g, _ := ln.AcquireGrant(ctx, 30)
	ln.DepositGrant(g, 30)
	if s := l.Status(); s.Granted != 0 {
		t.Fatalf("granted %d after the whole grant came back", s.Granted)
	}
}

func TestLanesShareOneLimitExactly(t *testing.T) {
	// Many lanes and the limiter itself, concurrently, in every epoch: the epoch's
	// share is granted exactly, never more.
	const share = 10_000
	l := newTestLimiter(t, Config{Max: share})
	for epoch := range 5 {
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
				defer cancel()
				acquire := l.AcquireGrant
				if w > 0 {
					acquire = l.Lane().AcquireGrant
				}
				got := 0
				for i := 0; ; i++ {
					g, err := acquire(ctx, 1+(i*7+w)%50)
					if err != nil {
						break
					}
					if i%5 == 0 {
						l.DepositGrant(g, 1)
						g.Tokens--
					}
					got += g.Tokens
				}
				mu.Lock()
				total += got
				mu.Unlock()
			})
		}
		wg.Wait()
		if total != share {
			t.Fatalf("epoch %d: %d tokens granted; want exactly %d", epoch, total, share)
		}
		l.clk.Advance(time.Second)
	}
}
