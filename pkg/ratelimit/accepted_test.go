package ratelimit

import (
	"testing"
	"time"
)

// downstream is a downstream on the manual clock that decides each request
// at the time it comes: take reports whether it accepts one at t.
type downstream interface {
	take(t time.Time) bool
}

// window accepts quota(epoch) requests in each one-second epoch.
type window struct {
	quota func(e int) int64
	base  time.Time
	sec   int64
	n     int64
}

func (w *window) take(t time.Time) bool {
	s := int64(t.Sub(w.base) / time.Second)
	if s != w.sec {
		w.sec, w.n = s, 0
	}
	if w.n >= w.quota(int(s)) {
		return false
	}
	w.n++
	return true
}

// bucket refills rate tokens a second up to burst.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *bucket) take(t time.Time) bool {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+b.rate*t.Sub(b.last).Seconds())
	}
	b.last = t
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sendRun drives a limiter through epochs of ten 100 ms steps: at each it
// takes every token it can and sends them to d, tells the limiter what d
// accepted, and signals with retryAfter at the first refusal of an epoch.
// It returns what d accepted and refused in each epoch.
func sendRun(t *testing.T, tl *testLimiter, epochs int, d downstream, retryAfter time.Duration) (accepted, refused []int64) {
	t.Helper()
	for range epochs {
		var acc, ref int64
		for range 10 {
			now := tl.clk.Now()
			n, ok := 0, 0
			for g := takeAll(tl); n < g; n++ {
				if d.take(now) {
					ok++
				} else {
					ref++
				}
			}
			acc += int64(ok)
			tl.Accepted(ok)
			if ok < n {
				tl.Signal(retryAfter)
			}
			tl.clk.Advance(100 * time.Millisecond)
		}
		accepted, refused = append(accepted, acc), append(refused, ref)
	}
	return accepted, refused
}

// TestAcceptedLearnsTheQuota: told what a fixed window accepted, the
// limiter learns its quota exactly, follows it down at once when it halves
// and back up within 5 epochs when it returns, probing one epoch in three
// at one token above it.
func TestAcceptedLearnsTheQuota(t *testing.T) {
	quota := func(e int) int64 {
		if e >= 20 && e < 40 {
			return 75
		}
		return 150
	}
	tl := newTestLimiter(t, issueConfig())
	acc, ref := sendRun(t, tl, 60, &window{quota: quota, base: tl.clk.Now(), sec: -1}, 0)
	t.Logf("accepted %v", acc)
	t.Logf("refused %v", ref)
	var a, r, q int64
	for e := 15; e < 60; e++ {
		a, r, q = a+acc[e], r+ref[e], q+quota(e)
	}
	if a*100 < 97*q || r*100 > 2*(a+r) {
		t.Errorf("epochs 15-59: accepted %d of a quota of %d, refused %d; want at least 97%% and at most 2%%", a, q, r)
	}
	for _, change := range []int{20, 40} {
		settled := -1
		for e := change; e+5 <= 60 && settled < 0; e++ {
			ok := true
			for i := e; i < e+5; i++ {
				ok = ok && acc[i]*100 >= 95*quota(i) && ref[i]*100 <= 2*quota(i)
			}
			if ok {
				settled = e - change
			}
		}
		if settled < 0 || settled > 5 {
			t.Errorf("the change at %d settled after %d epochs; want within 5", change, settled)
		}
	}
}

// TestPacingTrial: the first signal makes the replica pace its shares for
// a trial; a token bucket that takes more paced keeps it, a fixed window
// that does not ends it.
func TestPacingTrial(t *testing.T) {
	for _, tt := range []struct {
		name  string
		d     func(base time.Time) downstream
		paced bool
	}{
		{"token bucket", func(time.Time) downstream { return &bucket{rate: 150, burst: 50} }, true},
		{"fixed window", func(base time.Time) downstream {
			return &window{quota: func(int) int64 { return 150 }, base: base, sec: -1}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTestLimiter(t, issueConfig())
			acc, _ := sendRun(t, tl, 30, tt.d(tl.clk.Now()), time.Second)
			t.Logf("accepted %v", acc)
			tl.mu.Lock()
			paced := tl.quota.pacing() > 0
			tl.mu.Unlock()
			if paced != tt.paced {
				t.Errorf("paced after 30 epochs: %v; want %v", paced, tt.paced)
			}
			if tt.paced && sum(acc[20:]) <= 10*60 {
				t.Errorf("accepted %d in epochs 20-29; want more than the burst of 50 a second", sum(acc[20:]))
			}
		})
	}
}

// TestPauseEndsWithoutABurst: paced, the slices a pause covered are not
// granted at its end; the slice it ends in is.
func TestPauseEndsWithoutABurst(t *testing.T) {
	tl := newTestLimiter(t, Config{Max: 100, Pacing: 100 * time.Millisecond, Adaptive: true})
	if got := takeAll(tl); got != 10 {
		t.Fatalf("first slice: %d tokens; want 10", got)
	}
	tl.Signal(500 * time.Millisecond)
	tl.clk.Advance(550 * time.Millisecond)
	got := takeAll(tl)
	tl.clk.Advance(450 * time.Millisecond)
	if want := 10; got != want {
		t.Errorf("at the pause's end, in the sixth slice: %d tokens; want %d", got, want)
	}
}

// TestPacedAgainstATokenBucket: against a token bucket of 150 a second
// with a burst of 50, the replica paces, learns the burst from the burst
// it refused first and the rate from how long the bucket took to drain
// paced, holds just below it, and probes above it by a token, slowly
// enough that only a bucket too small for the probe runs dry: it uses
// nearly all of the rate and is seldom refused.
func TestPacedAgainstATokenBucket(t *testing.T) {
	tl := newTestLimiter(t, issueConfig())
	acc, ref := sendRun(t, tl, 120, &bucket{rate: 150, burst: 50}, time.Second)
	t.Logf("accepted %v", acc)
	t.Logf("refused %v", ref)
	a, r := sum(acc[30:]), sum(ref[30:])
	used := float64(a) / float64(150*len(acc[30:]))
	refused := float64(r) / float64(a+r)
	t.Logf("epochs 30-119: used %.1f%%, refused %.2f%%", 100*used, 100*refused)
	if used < 0.98 || refused > 0.01 {
		t.Errorf("epochs 30-119: used %.1f%%, refused %.2f%%; want at least 98%% and at most 1%%", 100*used, 100*refused)
	}
}
