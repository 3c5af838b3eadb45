package ratelimit

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch0 is an epoch boundary near the wall clock, so that contexts with deadlines
// measured on the manual clock are neither long past nor far ahead in real time.
func epoch0() time.Time { return time.Now().Truncate(time.Second) }

// expired is a context whose deadline has passed on every clock the tests use: a
// limiter with no tokens fails fast with it instead of waiting.
func expired(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	t.Cleanup(cancel)
	return ctx
}

type testLimiter struct {
	*Limiter
	clk *clock.Manual
}

func newTestLimiter(t *testing.T, cfg Config, opts ...Option) *testLimiter {
	t.Helper()
	clk := clock.NewManual(epoch0())
	l, err := New(cfg, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return &testLimiter{Limiter: l, clk: clk}
}

// acquireAsync starts Acquire(n) in a goroutine and returns once it is waiting:
// once the limiter counts one more waiting caller. Callers of a test limiter wait
// only from here, one at a time.
func (tl *testLimiter) acquireAsync(t *testing.T, ctx context.Context, n int) <-chan waitResult {
	t.Helper()
	before := tl.Status().Waiting
	out := make(chan waitResult, 1)
	go func() {
		g, err := tl.Acquire(ctx, n)
		out <- waitResult{grant: g, err: err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for tl.Status().Waiting <= before {
		select {
		case r := <-out:
			t.Fatalf("Acquire(%d) returned %d, %v; want it to wait", n, r.grant.Tokens, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire(%d) neither waited nor returned", n)
		}
		runtime.Gosched()
	}
	return out
}

func recvResult(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("waiting caller was not served")
		return waitResult{}
	}
}

func mustAcquire(t *testing.T, l *Limiter, ctx context.Context, n, want int) Grant {
	t.Helper()
	g, err := l.Acquire(ctx, n)
	if err != nil || g.Tokens != want {
		t.Fatalf("Acquire(%d) = %d, %v; want %d, nil", n, g.Tokens, err, want)
	}
	return g
}

func TestAcquireGrantsUpToShare(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 10})
	ctx := expired(t)
	mustAcquire(t, l.Limiter, ctx, 4, 4)
	mustAcquire(t, l.Limiter, ctx, 10, 6)

	g, err := l.Acquire(ctx, 1)
	var te *ThrottledError
	if g.Tokens != 0 || !errors.Is(err, ErrRateLimited) || !errors.As(err, &te) {
		t.Fatalf("Acquire on an empty share = %d, %v; want 0 and a ThrottledError", g.Tokens, err)
	}
	if te.Wait != time.Second || te.Reason != ReasonRateLimited || te.Cause != nil {
		t.Fatalf("ThrottledError = %+v; want wait 1s, reason rate_limited, no cause", te)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a fail-fast rate limit must not look like a bare timeout")
	}

	l.clk.Advance(250 * time.Millisecond)
	_, err = l.Acquire(ctx, 1)
	if !errors.As(err, &te) || te.Wait != 750*time.Millisecond {
		t.Fatalf("after 250ms: %v; want a wait of 750ms", err)
	}
	if s := l.Status(); s.Granted != 10 || s.Share != 10 || s.Throttled != ReasonRateLimited {
		t.Fatalf("status = %+v; want granted 10 of share 10, throttled", s)
	}

	l.clk.Advance(750 * time.Millisecond)
	mustAcquire(t, l.Limiter, ctx, 25, 10)
}

func TestAcquireZeroAndNegative(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 3})
	ctx := expired(t)
	mustAcquire(t, l.Limiter, ctx, 0, 0)
	mustAcquire(t, l.Limiter, ctx, -5, 0)
	if !l.Status().Called {
		t.Fatal("Acquire(0) must count as a call")
	}
	mustAcquire(t, l.Limiter, ctx, 1<<62, 3)
}

func TestTryAcquire(t *testing.T) {
	t.Run("partial grant, then the reason", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		if g, r := l.TryAcquire(4); g.Tokens != 4 || r != NotThrottled {
			t.Fatalf("TryAcquire(4) = %d, %v; want 4, none", g.Tokens, r)
		}
		if g, r := l.TryAcquire(25); g.Tokens != 6 || r != NotThrottled {
			t.Fatalf("TryAcquire(25) = %d, %v; want the 6 left, none", g.Tokens, r)
		}
		if g, r := l.TryAcquire(1); g.Tokens != 0 || r != ReasonRateLimited {
			t.Fatalf("TryAcquire on an empty share = %d, %v; want 0, rate_limited", g.Tokens, r)
		}
		if s := l.Status(); s.Granted != 10 || s.Waiting != 0 {
			t.Fatalf("status = %+v; want 10 granted and nobody waiting", s)
		}
		l.clk.Advance(time.Second)
		if g, r := l.TryAcquire(1 << 62); g.Tokens != 10 || r != NotThrottled {
			t.Fatalf("TryAcquire in the next epoch = %d, %v; want 10", g.Tokens, r)
		}
	})
	t.Run("zero counts as a call", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 3})
		if g, r := l.TryAcquire(0); g.Tokens != 0 || r != NotThrottled {
			t.Fatalf("TryAcquire(0) = %d, %v; want 0, none", g.Tokens, r)
		}
		if g, r := l.TryAcquire(-1); g.Tokens != 0 || r != NotThrottled {
			t.Fatalf("TryAcquire(-1) = %d, %v; want 0, none", g.Tokens, r)
		}
		if !l.Status().Called {
			t.Fatal("TryAcquire(0) must count as a call")
		}
	})
	t.Run("waiting callers come first", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		g := mustAcquire(t, l.Limiter, context.Background(), 10, 10)
		res := l.acquireAsync(t, context.Background(), 4)
		l.Deposit(g, 3) // the waiter takes the 3
		if r := recvResult(t, res); r.grant.Tokens != 3 {
			t.Fatalf("waiter got %d; want the 3 deposited", r.grant.Tokens)
		}
		if g, r := l.TryAcquire(1); g.Tokens != 0 || r != ReasonRateLimited {
			t.Fatalf("TryAcquire after the waiter = %d, %v; want 0, rate_limited", g.Tokens, r)
		}
	})
}

func TestAcquireWaitsForNextEpoch(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 10})
	mustAcquire(t, l.Limiter, context.Background(), 10, 10)

	ctx, cancel := context.WithDeadline(context.Background(), l.clk.Now().Add(10*time.Second))
	defer cancel()
	res := l.acquireAsync(t, ctx, 4)
	l.clk.Advance(999 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("served before the epoch ended: %+v", r)
	default:
	}
	l.clk.Advance(time.Millisecond)
	r := recvResult(t, res)
	if r.err != nil || r.grant.Tokens != 4 {
		t.Fatalf("waiter got %d, %v; want 4, nil", r.grant.Tokens, r.err)
	}
	if s := l.Status(); s.Granted != 4 {
		t.Fatalf("new epoch granted %d; want the waiter's 4", s.Granted)
	}
}

func TestWaitCutShortIsRateLimitedNotTimeout(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 1})
	mustAcquire(t, l.Limiter, context.Background(), 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	res := l.acquireAsync(t, ctx, 1)
	cancel()
	r := recvResult(t, res)
	var te *ThrottledError
	if !errors.As(r.err, &te) || !errors.Is(r.err, ErrRateLimited) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled wait = %v; want a ThrottledError wrapping context.Canceled", r.err)
	}
	if l.Status().Waiting != 0 {
		t.Fatal("cancelled caller is still queued")
	}
	// The next epoch's tokens are not lost to the caller that gave up.
	l.clk.Advance(time.Second)
	mustAcquire(t, l.Limiter, expired(t), 5, 1)
}

func TestDeposit(t *testing.T) {
	t.Run("same epoch", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		ctx := expired(t)
		g := mustAcquire(t, l.Limiter, ctx, 10, 10)
		l.Deposit(g, 3)
		mustAcquire(t, l.Limiter, ctx, 10, 3)
	})
	t.Run("never more than granted", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		ctx := expired(t)
		g := mustAcquire(t, l.Limiter, ctx, 2, 2)
		l.Deposit(g, 50)
		g = mustAcquire(t, l.Limiter, ctx, 100, 10)
		l.Deposit(g, -1)
		l.Deposit(Grant{Tokens: 3, epoch: l.Status().Epoch}, 0)
		l.Deposit(Grant{epoch: l.Status().Epoch}, 5)
		l.Deposit(Grant{}, 5)
		if g, _ := l.Acquire(ctx, 1); g.Tokens != 0 {
			t.Fatalf("Acquire after empty deposits = %d; want 0", g.Tokens)
		}
	})
	t.Run("grant of an ended epoch is dropped", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		ctx := expired(t)
		old := mustAcquire(t, l.Limiter, ctx, 10, 10)
		l.clk.Advance(time.Second)
		g := mustAcquire(t, l.Limiter, ctx, 4, 4)
		l.Deposit(old, 10)
		if s := l.Status(); s.Granted != 4 {
			t.Fatalf("granted %d after a stale deposit; want 4", s.Granted)
		}
		l.Deposit(g, 1)
		mustAcquire(t, l.Limiter, ctx, 100, 7)
	})
	t.Run("deposit serves a waiting caller", func(t *testing.T) {
		l := newTestLimiter(t, Config{Max: 10})
		g, _ := l.Acquire(context.Background(), 10)
		res := l.acquireAsync(t, context.Background(), 5)
		l.Deposit(g, 6)
		if r := recvResult(t, res); r.grant.Tokens != 5 || r.err != nil {
			t.Fatalf("waiter got %+v", r)
		}
		mustAcquire(t, l.Limiter, expired(t), 5, 1)
	})
	t.Run("deposits count for utilization", func(t *testing.T) {
		// OnlyIfUsed at 100%: an epoch that gave back tokens does not ramp.
		l := newTestLimiter(t, Config{Max: 30, Min: 10, RampUpDuration: 2 * time.Second, Mode: OnlyIfUsed, ThresholdPercentage: 100})
		ctx := expired(t)
		g, _ := l.Acquire(ctx, 10)
		l.Deposit(g, 1)
		l.clk.Advance(time.Second)
		mustAcquire(t, l.Limiter, ctx, 100, 10)
		l.clk.Advance(time.Second)
		mustAcquire(t, l.Limiter, ctx, 100, 20)
	})
}

func TestFairness(t *testing.T) {
	// Two readers share a limiter of 10 per epoch and each asks for all of it. In
	// arrival order they take turns instead of one starving the other.
	l := newTestLimiter(t, Config{Max: 10})
	ctx := context.Background()
	mustAcquire(t, l.Limiter, ctx, 10, 10)
	a := l.acquireAsync(t, ctx, 10)
	b := l.acquireAsync(t, ctx, 10)
	got := map[string]int{}
	for range 10 {
		l.clk.Advance(time.Second)
		select {
		case r := <-a:
			got["a"] += r.grant.Tokens
			a = l.acquireAsync(t, ctx, 10)
		case r := <-b:
			got["b"] += r.grant.Tokens
			b = l.acquireAsync(t, ctx, 10)
		case <-time.After(5 * time.Second):
			t.Fatal("nobody was served")
		}
	}
	if got["a"] != 50 || got["b"] != 50 {
		t.Fatalf("tokens per reader = %v; want 50 each", got)
	}
	l.Close(ctx)
	for _, ch := range []<-chan waitResult{a, b} {
		if r := recvResult(t, ch); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("waiter after Close got %v; want ErrClosed", r.err)
		}
	}
}

func TestWaitersServedInArrivalOrderWithPartialGrants(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 10})
	ctx := context.Background()
	mustAcquire(t, l.Limiter, ctx, 10, 10)
	first := l.acquireAsync(t, ctx, 7)
	second := l.acquireAsync(t, ctx, 7)
	third := l.acquireAsync(t, ctx, 7)
	l.clk.Advance(time.Second)
	if r := recvResult(t, first); r.grant.Tokens != 7 {
		t.Fatalf("first got %d; want 7", r.grant.Tokens)
	}
	if r := recvResult(t, second); r.grant.Tokens != 3 {
		t.Fatalf("second got %d; want the 3 left", r.grant.Tokens)
	}
	select {
	case r := <-third:
		t.Fatalf("third served from an empty share: %+v", r)
	default:
	}
	// A newcomer with tokens gone queues behind the third.
	fourth := l.acquireAsync(t, ctx, 7)
	l.clk.Advance(time.Second)
	if r := recvResult(t, third); r.grant.Tokens != 7 {
		t.Fatalf("third got %d; want 7", r.grant.Tokens)
	}
	if r := recvResult(t, fourth); r.grant.Tokens != 3 {
		t.Fatalf("fourth got %d; want 3", r.grant.Tokens)
	}
}

func TestPacing(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 100, Pacing: 100 * time.Millisecond})
	ctx := expired(t)
	mustAcquire(t, l.Limiter, ctx, 100, 10)
	_, err := l.Acquire(ctx, 1)
	var te *ThrottledError
	if !errors.As(err, &te) || te.Wait != 100*time.Millisecond {
		t.Fatalf("paced wait = %v; want 100ms to the next slice", err)
	}
	total := 10
	for range 9 {
		l.clk.Advance(100 * time.Millisecond)
		g, _ := l.Acquire(ctx, 100)
		if g.Tokens != 10 {
			t.Fatalf("slice grant %d; want 10", g.Tokens)
		}
		total += g.Tokens
	}
	if total != 100 {
		t.Fatalf("epoch total %d; want 100", total)
	}
	// A caller that comes late in the epoch gets everything allowed so far.
	l.clk.Advance(100*time.Millisecond + 450*time.Millisecond)
	mustAcquire(t, l.Limiter, ctx, 100, 50)
}

func TestPacingServesWaitersEachSlice(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 10, Pacing: 250 * time.Millisecond})
	ctx := context.Background()
	mustAcquire(t, l.Limiter, ctx, 10, 2) // floor(10*1/4)
	res := l.acquireAsync(t, ctx, 10)
	l.clk.Advance(250 * time.Millisecond)
	if r := recvResult(t, res); r.grant.Tokens != 3 { // floor(10*2/4) - 2
		t.Fatalf("waiter got %d; want 3", r.grant.Tokens)
	}
}

func TestScheduledRampsWithoutCalls(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 50, Min: 10, RampUpDuration: 4 * time.Second, Mode: Scheduled})
	l.clk.Advance(3 * time.Second)
	mustAcquire(t, l.Limiter, expired(t), 100, 40)
	l.clk.Advance(time.Hour)
	mustAcquire(t, l.Limiter, expired(t), 100, 50)
}

func TestRampUpZeroStartsAtMax(t *testing.T) {
	for _, m := range []Mode{Relaxed, Scheduled, OnlyIfUsed, GoBackN} {
		t.Run(m.String(), func(t *testing.T) {
			l := newTestLimiter(t, Config{Max: 7, Min: 1, Mode: m, ThresholdPercentage: 50})
			mustAcquire(t, l.Limiter, expired(t), 100, 7)
		})
	}
}

func TestGoBackNCoolDown(t *testing.T) {
	// Default cool-down 5s: up to 5 idle epochs keep the utilization rule; more ramp
	// down by rampDownPercentage of a slope (10 tokens) per idle epoch.
	tests := []struct {
		idle     int
		rampDown int
		want     int
	}{
		{idle: 0, rampDown: 50, want: 40}, // 30 of 30 used: up a slope
		{idle: 5, rampDown: 50, want: 40}, // within the cool-down
		{idle: 6, rampDown: 10, want: 24}, // 30 - 10*10%*6
		{idle: 7, rampDown: 10, want: 23},
		{idle: 6, rampDown: 50, want: 10},   // 30 - 30, clamped to min
		{idle: 100, rampDown: 50, want: 10}, // clamped to min
	}
	for _, tt := range tests {
		cfg := DefaultConfig(110)
		cfg.Min, cfg.RampUpDuration, cfg.Mode, cfg.RampDownPercentage = 10, 10*time.Second, GoBackN, tt.rampDown
		l := newTestLimiter(t, cfg)
		ctx := expired(t)
		for _, want := range []int{10, 20, 30} {
			mustAcquire(t, l.Limiter, ctx, 1000, want)
			l.clk.Advance(time.Second)
		}
		l.clk.Advance(time.Duration(tt.idle) * time.Second)
		if g, _ := l.TryAcquire(1000); g.Tokens != tt.want {
			t.Errorf("idle %d, ramp-down %d%%: got %d tokens; want %d", tt.idle, tt.rampDown, g.Tokens, tt.want)
		}
	}
}

func TestCloseTwiceAndAfterClose(t *testing.T) {
	l := newTestLimiter(t, Config{Max: 5})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := l.Acquire(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v; want ErrClosed", err)
	}
	ln := l.Lane()
	if _, err := ln.Acquire(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lane.Acquire after Close = %v; want ErrClosed", err)
	}
	if g, r := ln.TryAcquire(1); g.Tokens != 0 || r != ReasonRateLimited {
		t.Fatalf("Lane.TryAcquire after Close = %d, %v; want 0, rate_limited", g.Tokens, r)
	}
	ln.Deposit(Grant{Tokens: 1}, 1)
	l.Deposit(Grant{Tokens: 1}, 1)
	if l.clk.Pending() != 0 {
		t.Fatalf("%d timers left after Close", l.clk.Pending())
	}
}

// TestEpochObserver checks that the observer hears of each epoch once, when it
// ends, and of the epoch cut short by Close, with what was granted in it.
func TestEpochObserver(t *testing.T) {
	seen := make(chan EpochSummary, 8)
	l := newTestLimiter(t, Config{Max: 10}, WithEpochObserver(func(s EpochSummary) { seen <- s }))
	first := l.Status().Epoch
	mustAcquire(t, l.Limiter, expired(t), 4, 4)
	l.clk.Advance(time.Second)
	got := <-seen
	if got.Epoch != first || got.Granted != 4 || got.Share != 10 || !got.Eligible {
		t.Fatalf("first summary = %+v; want epoch %d, granted 4 of share 10, eligible", got, first)
	}
	mustAcquire(t, l.Limiter, expired(t), 3, 3)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case got = <-seen:
	default:
		t.Fatal("Close did not report the epoch it cut short")
	}
	if got.Epoch != first+1 || got.Granted != 3 {
		t.Fatalf("summary at Close = %+v; want epoch %d, granted 3", got, first+1)
	}
	if err := l.Close(context.Background()); err != nil || len(seen) != 0 {
		t.Fatalf("second Close = %v with %d more summaries; want nil and none", err, len(seen))
	}
}

func TestConcurrentNeverExceedsShare(t *testing.T) {
	// Workers take tokens until the share is gone, giving back part of their
	// previous grant as they go, which after a boundary belongs to an ended epoch.
	// Per epoch the tokens kept never exceed the share, and the whole share is
	// handed out.
	const (
		share   = 1000
		workers = 4
		epochs  = 10
	)
	l := newTestLimiter(t, Config{Max: share})
	var mu sync.Mutex
	kept := map[int64]int{}   // granted less accepted deposits
	handed := map[int64]int{} // granted
	exhausted := make(chan struct{}, workers)
	resume := make([]chan struct{}, epochs)
	for i := range resume {
		resume[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			defer cancel()
			acquire := l.Acquire
			if w%2 == 1 {
				acquire = l.Lane().Acquire
			}
			var prev Grant
			for e, i := 0, 0; e < epochs; i++ {
				g, err := acquire(ctx, 1+(i+w)%40)
				// Give back a third of the previous grant; the limiter drops it when
				// its epoch has ended. Epochs change only while every worker waits,
				// so the current epoch is stable here.
				back := prev.Tokens / 3
				cur := l.state.Load().epoch
				l.Deposit(prev, back)
				mu.Lock()
				if back > 0 && prev.epoch == cur {
					kept[prev.epoch] -= back
				}
				if err == nil {
					kept[g.epoch] += g.Tokens
					handed[g.epoch] += g.Tokens
				}
				mu.Unlock()
				prev = g
				if err != nil {
					if !errors.Is(err, ErrRateLimited) {
						t.Error(err)
					}
					exhausted <- struct{}{}
					<-resume[e]
					e++
				}
			}
		})
	}
	for e := range epochs {
		for range workers {
			select {
			case <-exhausted:
			case <-time.After(10 * time.Second):
				t.Fatalf("epoch %d: workers did not use up the share", e)
			}
		}
		l.clk.Advance(time.Second)
		close(resume[e])
	}
	wg.Wait()
	if len(kept) < epochs {
		t.Fatalf("tokens in %d epochs; want %d", len(kept), epochs)
	}
	for e, n := range kept {
		if n > share {
			t.Errorf("epoch %d: %d tokens kept; share %d", e, n, share)
		}
		if handed[e] < share {
			t.Errorf("epoch %d: only %d tokens handed out; share %d", e, handed[e], share)
		}
	}
}

func TestRealClockEpochBoundary(t *testing.T) {
	// On the wall clock the share is renewed at the boundary by a timer, not by the
	// callers: a waiting caller is served once the next second begins.
	l, err := New(Config{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g1, err := l.Acquire(ctx, 1)
	if g1.Tokens != 1 || err != nil {
		t.Fatalf("first Acquire = %+v, %v", g1, err)
	}
	g2, err := l.Acquire(ctx, 1)
	if g2.Tokens != 1 || err != nil {
		t.Fatalf("second Acquire = %+v, %v; want 1 after the boundary", g2, err)
	}
	if g2.epoch <= g1.epoch {
		t.Fatalf("second grant in epoch %d; want after %d", g2.epoch, g1.epoch)
	}
	if now := time.Now().Unix(); now < g2.epoch {
		t.Fatalf("served at second %d, before its epoch %d began", now, g2.epoch)
	}
}

func TestServedWaiterCountsAsCall(t *testing.T) {
	// Relaxed ramps in each epoch with a call; a caller served at the boundary
	// called in the new epoch even if it makes no other call there.
	l := newTestLimiter(t, Config{Max: 100, Min: 10, RampUpDuration: 9 * time.Second})
	mustAcquire(t, l.Limiter, context.Background(), 10, 10)
	res := l.acquireAsync(t, context.Background(), 10)
	l.clk.Advance(time.Second)
	if r := recvResult(t, res); r.grant.Tokens != 10 {
		t.Fatalf("waiter got %d; want 10", r.grant.Tokens)
	}
	l.clk.Advance(time.Second)
	mustAcquire(t, l.Limiter, expired(t), 1000, 30)
}

// blockingStore is a store whose Sync blocks until its context ends, as a store
// behind a network that drops packets does.
type blockingStore struct{ entered chan share.Report }

func (s blockingStore) Sync(ctx context.Context, r share.Report) (share.View, error) {
	s.entered <- r
	<-ctx.Done()
	return share.View{}, ctx.Err()
}

func (blockingStore) Leave(context.Context, share.Report) error { return nil }

func TestNewDoesNoIO(t *testing.T) {
	// New returns while the store does not answer; the first sync starts from the
	// background at once, and Close cuts it short.
	store := blockingStore{entered: make(chan share.Report, 1)}
	l, err := New(Config{Max: 10}, WithStore(store), WithReplicaID("a"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-store.entered:
		if r.ID != "a" || r.Replicas != 0 {
			t.Fatalf("first sync reported %+v; want a registration of a", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first sync did not start")
	}
	if g, r := l.TryAcquire(1); g.Tokens != 0 || r != ReasonAwaitingAgreement {
		t.Fatalf("TryAcquire before registering = %d, %v; want 0, awaiting_agreement", g.Tokens, r)
	}
	if s := l.Status(); s.StoreUp {
		t.Fatal("status says the store is up before any sync")
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestGrantStaysInRegisters checks that a Grant, and each struct in it, has
// at most four fields: the compiler keeps such a value in registers, while a
// fifth field puts every Grant of Acquire and Deposit on the stack, which
// BenchmarkAcquireDeposit measures at about three times the cost.
func TestGrantStaysInRegisters(t *testing.T) {
	var check func(reflect.Type)
	check = func(typ reflect.Type) {
		if typ.NumField() > 4 {
			t.Errorf("%v has %d fields; at most 4 keep it in registers", typ, typ.NumField())
		}
		for i := range typ.NumField() {
			if f := typ.Field(i).Type; f.Kind() == reflect.Struct {
				check(f)
			}
		}
	}
	check(reflect.TypeOf(Grant{}))
}

func TestStatusShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Status
		want []int64
	}{
		{"unknown size", Status{PoolMilli: 20_000}, nil},
		{"even", Status{PoolMilli: 20_000, Replicas: 2}, []int64{10, 10}},
		{"remainder to the first ranks", Status{PoolMilli: 20_500, Replicas: 3}, []int64{7, 7, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Shares(); !slices.Equal(got, tc.want) {
				t.Errorf("Shares() = %v, want %v", got, tc.want)
			}
		})
	}
}
