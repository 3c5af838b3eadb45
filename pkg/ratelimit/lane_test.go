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
	lg, _ := ln.Acquire(ctx, 10)
	if lg.Tokens != 10 {
		t.Fatalf("lane got %d; want 10", lg.Tokens)
	}
	if s := l.Status(); s.Granted != 10 {
		t.Fatalf("granted %d; tokens a lane holds are not granted", s.Granted)
	}
	// Another caller still gets every token left, some of them from the lane.
	mustAcquire(t, l.Limiter, ctx, 1000, 90)
	if g, err := ln.Acquire(ctx, 1); g.Tokens != 0 || !errors.Is(err, ErrRateLimited) {
		t.Fatalf("lane after the share is gone: %d, %v", g.Tokens, err)
	}
	if g, r := ln.TryAcquire(1); g.Tokens != 0 || r != ReasonRateLimited {
		t.Fatalf("lane TryAcquire after the share is gone: %d, %v", g.Tokens, r)
	}
	// Deposits through a lane go back to the lane and count for the epoch.
	ln.Deposit(lg, 5)
	if s := l.Status(); s.Granted != 95 {
		t.Fatalf("granted %d after a lane deposit of 5; want 95", s.Granted)
	}
	mustAcquire(t, l.Limiter, ctx, 1000, 5)
	l.clk.Advance(time.Second)
	g, r := ln.TryAcquire(30)
	if g.Tokens != 30 || r != NotThrottled {
		t.Fatalf("lane TryAcquire in a new epoch = %d, %v; want 30", g.Tokens, r)
	}
	ln.Deposit(g, 30)
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
				acquire := l.Acquire
				if w > 0 {
					acquire = l.Lane().Acquire
				}
				got := 0
				for i := 0; ; i++ {
					g, err := acquire(ctx, 1+(i*7+w)%50)
					if err != nil {
						break
					}
					if i%5 == 0 {
						l.Deposit(g, 1)
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
