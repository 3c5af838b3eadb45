package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func TestInflightAIMD(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := newInflight(32, clk)
	throttled := &isb.ThrottledError{Signal: isb.SignalHTTP429}

	// 32 in flight, all answered 429: one halving, not 32.
	var ns []uint64
	for range 32 {
		n, err := f.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	for _, n := range ns {
		f.release(n, throttled)
	}
	if got := f.Limit(); got != 16 {
		t.Fatalf("limit after a burst of 429s: %d; want 16", got)
	}
	// A 429 for a request sent after the halving halves again.
	n, _ := f.acquire(ctx)
	f.release(n, throttled)
	if got := f.Limit(); got != 8 {
		t.Fatalf("limit after a later 429: %d; want 8", got)
	}
	// Only 8 may be in flight: the ninth waits until one is answered.
	ns = ns[:0]
	for range 8 {
		n, _ := f.acquire(ctx)
		ns = append(ns, n)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if _, err := f.acquire(waitCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a ninth request at a limit of 8: %v; want it to wait", err)
	}
	cancel()
	// Eight answers 2xx raise it by one.
	for _, n := range ns {
		f.release(n, nil)
	}
	if got := f.Limit(); got != 9 {
		t.Fatalf("limit after 8 answers 2xx: %d; want 9", got)
	}
	// Other failures neither raise nor lower it; an abandoned slot is free.
	n, _ = f.acquire(ctx)
	f.release(n, errors.New("500"))
	n, _ = f.acquire(ctx)
	f.abandon()
	if got := f.Limit(); got != 9 || f.busy != 0 {
		t.Fatalf("limit %d, busy %d; want 9 and 0", got, f.busy)
	}
	// Never below one, never above the most.
	for range 10 {
		n, _ := f.acquire(ctx)
		f.release(n, throttled)
	}
	if got := f.Limit(); got != 1 {
		t.Fatalf("limit after ten 429s: %d; want 1", got)
	}
	for range 2000 {
		n, _ := f.acquire(ctx)
		f.release(n, nil)
	}
	if got := f.Limit(); got != 32 {
		t.Fatalf("limit after 2000 answers 2xx: %d; want 32", got)
	}
}

func TestInflightHoldsForRetryAfter(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := newInflight(4, clk)
	n, _ := f.acquire(ctx)
	f.release(n, &isb.ThrottledError{RetryAfter: 2 * time.Second, Signal: isb.SignalHTTP429})
	clk.Advance(500 * time.Millisecond)
	_, err := f.acquire(ctx)
	te, ok := asThrottled(err)
	if !ok || te.RetryAfter != 1500*time.Millisecond || te.Signal != isb.SignalUnknown {
		t.Fatalf("acquire during the Retry-After: %v; want throttled for 1.5s with no signal", err)
	}
	clk.Advance(1500 * time.Millisecond)
	if _, err := f.acquire(ctx); err != nil {
		t.Fatalf("acquire after the Retry-After: %v", err)
	}
}
