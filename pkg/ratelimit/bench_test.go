package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// The benchmarks run the hot path of one forward iteration: take a batch's tokens,
// then give back what the read did not use. The pool is far above what a core can
// take, so nothing waits. x/time/rate's AllowN, with the time.Now it needs, runs
// beside them as the yardstick.

func newBenchLimiter(b *testing.B) *ratelimit.Limiter {
	l, err := ratelimit.New(ratelimit.Config{Max: ratelimit.MaxTokens})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func newBenchRate() *rate.Limiter { return rate.NewLimiter(rate.Limit(1e12), 1<<40) }

// BenchmarkAcquireDeposit is the serial cost. "used" is the throttled steady state:
// the reader used every token it got and deposits 0. "unused" gives part of every
// grant back, the worst case: two atomic adds per iteration.
func BenchmarkAcquireDeposit(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/used", func(b *testing.B) {
		l := newBenchLimiter(b)
		for b.Loop() {
			g, _ := l.Acquire(ctx, 500)
			l.Deposit(g, 500-g.Tokens)
		}
	})
	b.Run("sluice/unused", func(b *testing.B) {
		l := newBenchLimiter(b)
		for b.Loop() {
			g, _ := l.Acquire(ctx, 500)
			l.Deposit(g, g.Tokens/4)
		}
	})
	b.Run("x-time-rate/AllowN", func(b *testing.B) {
		r := newBenchRate()
		for b.Loop() {
			r.AllowN(time.Now(), 500)
		}
	})
}

// BenchmarkAcquireDepositParallel is the same with b.RunParallel, GOMAXPROCS
// goroutines sharing one limiter, each through its own Lane as concurrent readers
// should; "shared" has them all call the Limiter itself.
func BenchmarkAcquireDepositParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/used", func(b *testing.B) {
		l := newBenchLimiter(b)
		b.RunParallel(func(pb *testing.PB) {
			ln := l.Lane()
			for pb.Next() {
				g, _ := ln.Acquire(ctx, 500)
				ln.Deposit(g, 500-g.Tokens)
			}
		})
	})
	b.Run("sluice/unused", func(b *testing.B) {
		l := newBenchLimiter(b)
		b.RunParallel(func(pb *testing.PB) {
			ln := l.Lane()
			for pb.Next() {
				g, _ := ln.Acquire(ctx, 500)
				ln.Deposit(g, g.Tokens/4)
			}
		})
	})
	b.Run("sluice/shared-unused", func(b *testing.B) {
		l := newBenchLimiter(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g, _ := l.Acquire(ctx, 500)
				l.Deposit(g, g.Tokens/4)
			}
		})
	})
	b.Run("x-time-rate/AllowN", func(b *testing.B) {
		r := newBenchRate()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.AllowN(time.Now(), 500)
			}
		})
	})
}
