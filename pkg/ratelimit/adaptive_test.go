package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// adaptive is a config that ramps from 10 to 100 in slopes of 10, cuts by
// half and learns no ceiling (ceiling_test.go tests the ceiling).
func adaptive(mode Mode) Config {
	c := DefaultConfig(100)
	c.Min, c.RampUpDuration, c.Mode = 10, 9*time.Second, mode
	c.Adaptive, c.ForgetAfter = true, 0
	return c
}

// takeAll takes what the limiter grants now, without waiting.
func takeAll(tl *testLimiter) int {
	g, _ := tl.TryAcquire(1_000_000)
	return g.Tokens
}

// rampToMax calls in every epoch until the pool reaches the config's max,
// and leaves the clock at the start of the next epoch.
func rampToMax(t *testing.T, tl *testLimiter) {
	t.Helper()
	for range 20 {
		takeAll(tl)
		if tl.Status().PoolMilli == tl.cfg.Max*milli {
			tl.clk.Advance(time.Second)
			return
		}
		tl.clk.Advance(time.Second)
	}
	t.Fatalf("pool %v after 20 epochs; want it at max %d", tl.Status().Pool(), tl.cfg.Max)
}

// pools takes all it can in each of n epochs and returns the pool of each.
func pools(tl *testLimiter, n int) []float64 {
	var out []float64
	for range n {
		takeAll(tl)
		out = append(out, tl.Status().Pool())
		tl.clk.Advance(time.Second)
	}
	return out
}

func TestCutOf(t *testing.T) {
	for _, tt := range []struct {
		min, pct, pool, want int64 // tokens, but pool and want in milli-tokens
	}{
		{10, 50, 100_000, 50_000},
		{10, 50, 15_000, 10_000}, // not below min
		{0, 50, 33_500, 16_000},  // floor(16.75) tokens
		{0, 100, 80_000, 0},      // all of it
		{5, 0, 42_000, 42_000},   // a cut of 0% leaves the pool
		{1, 25, 1_000_000, 750_000},
	} {
		q := quota{cfg: quotaConfig{min: tt.min * milli, cutPct: tt.pct}}
		if got := q.cutOf(tt.pool); got != tt.want {
			t.Errorf("min %d, cut %d%%: cutOf(%d) = %d; want %d", tt.min, tt.pct, tt.pool, got, tt.want)
		}
	}
}

func TestSignalCutsThePoolOncePerEpoch(t *testing.T) {
	tl := newTestLimiter(t, adaptive(Relaxed))
	rampToMax(t, tl)
	if got := takeAll(tl); got != 100 {
		t.Fatalf("took %d at max; want 100", got)
	}
	for range 5 { // many signals in one epoch cut once
		tl.Signal(0)
	}
	tl.clk.Advance(time.Second)
	if got, want := pools(tl, 1), []float64{50}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pool after 5 signals in one epoch: %v; want %v", got, want)
	}
	// The next epoch, at 60, is another: its signal cuts again, and the pool
	// then ramps back by the mode.
	takeAll(tl)
	tl.Signal(0)
	tl.Signal(0)
	tl.clk.Advance(time.Second)
	if got, want := pools(tl, 4), []float64{30, 40, 50, 60}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pools after a second cut: %v; want %v", got, want)
	}
	if got := tl.Status().Cuts; got != 2 {
		t.Errorf("Status().Cuts = %d; want 2", got)
	}
}

func TestSignalCutsNoLowerThanMin(t *testing.T) {
	tl := newTestLimiter(t, adaptive(Relaxed))
	takeAll(tl) // pool 10 = min
	tl.Signal(0)
	tl.clk.Advance(time.Second)
	if got, want := pools(tl, 3), []float64{10, 20, 30}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pools after a cut at min: %v; want %v", got, want)
	}
}

func TestSignalWithoutAdaptiveDoesNothing(t *testing.T) {
	cfg := adaptive(Relaxed)
	cfg.Adaptive = false
	tl := newTestLimiter(t, cfg)
	rampToMax(t, tl)
	takeAll(tl)
	tl.Signal(5 * time.Second)
	tl.clk.Advance(time.Second)
	if got := takeAll(tl); got != 100 {
		t.Errorf("took %d after a signal with adaptive off; want 100", got)
	}
	if s := tl.Status(); s.Cuts != 0 || !s.PausedUntil.IsZero() {
		t.Errorf("status %+v; want no cut and no pause", s)
	}
}

func TestSignalPausesUntilRetryAfter(t *testing.T) {
	cfg := Config{Max: 10, Min: 10, Adaptive: true} // a cut of 0%: a pause alone
	var ended []EpochSummary
	tl := newTestLimiter(t, cfg, WithEpochObserver(func(s EpochSummary) { ended = append(ended, s) }))
	start := tl.clk.Now()
	g := mustAcquire(t, tl.Limiter, expired(t), 4, 4)
	tl.clk.Advance(200 * time.Millisecond)
	tl.Signal(1500 * time.Millisecond)

	if g, reason := tl.TryAcquire(1); g.Tokens != 0 || reason != ReasonDownstreamThrottled {
		t.Fatalf("TryAcquire while paused = %d, %v; want 0, downstream_throttled", g.Tokens, reason)
	}
	if got, want := tl.Status().PausedUntil, start.Add(1700*time.Millisecond); !got.Equal(want) {
		t.Errorf("PausedUntil = %v; want %v", got, want)
	}
	tl.Deposit(g, 2) // given back during the pause: held back too
	if g, _ := tl.TryAcquire(1); g.Tokens != 0 {
		t.Fatalf("a deposit during the pause granted %d", g.Tokens)
	}
	_, err := tl.Acquire(expired(t), 1)
	var te *ThrottledError
	if !errors.As(err, &te) || te.Reason != ReasonDownstreamThrottled {
		t.Fatalf("Acquire with an expired deadline while paused: %v; want a ThrottledError for downstream_throttled", err)
	}

	tl.clk.Advance(800 * time.Millisecond) // the next epoch starts paused
	if s := tl.Status(); s.Throttled != ReasonDownstreamThrottled || s.Epoch != ended[0].Epoch+1 {
		t.Fatalf("status at the next epoch %+v; want it throttled by the downstream", s)
	}
	w := tl.acquireAsync(t, t.Context(), 3)
	tl.clk.Advance(699 * time.Millisecond)
	select {
	case r := <-w:
		t.Fatalf("a waiting caller got %d, %v before the pause ended", r.grant.Tokens, r.err)
	default:
	}
	tl.clk.Advance(time.Millisecond)
	if r := recvResult(t, w); r.err != nil || r.grant.Tokens != 3 {
		t.Fatalf("waiting caller at the pause's end got %d, %v; want 3", r.grant.Tokens, r.err)
	}
	if got := takeAll(tl); got != 7 {
		t.Errorf("took %d after the pause; want the rest of the share, 7", got)
	}
	if s := tl.Status(); !s.PausedUntil.IsZero() || s.Throttled != ReasonRateLimited {
		t.Errorf("status after the pause %+v; want no pause", s)
	}
	if e := ended[0]; !e.Paused || e.Granted != 2 {
		t.Errorf("the signal's epoch: %+v; want paused with 2 granted (4 less the deposit)", e)
	}
}

// After a cut and a pause over a whole epoch, every mode starts again from
// the cut pool and ramps up by one slope per epoch used in full.
func TestRampBackAfterCutAndPause(t *testing.T) {
	for _, mode := range []Mode{Relaxed, Scheduled, OnlyIfUsed, GoBackN} {
		t.Run(mode.String(), func(t *testing.T) {
			tl := newTestLimiter(t, adaptive(mode))
			rampToMax(t, tl)
			takeAll(tl)
			tl.Signal(2 * time.Second)
			tl.clk.Advance(time.Second)
			if got := takeAll(tl); got != 0 {
				t.Fatalf("took %d in a paused epoch", got)
			}
			if s := tl.Status(); s.Pool() != 50 {
				t.Fatalf("pool in the paused epoch %v; want 50", s.Pool())
			}
			tl.clk.Advance(time.Second)
			if got, want := pools(tl, 4), []float64{50, 60, 70, 80}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("pools after the pause: %v; want %v", got, want)
			}
		})
	}
}

// Scheduled climbs back from a cut one slope per epoch, calls or not, up to
// max.
func TestScheduledClimbsBackFromACut(t *testing.T) {
	cfg := adaptive(Scheduled)
	cfg.RampUpDuration = 18 * time.Second // 5 a second, to 100 at epoch 18
	tl := newTestLimiter(t, cfg)
	for range 4 {
		takeAll(tl)
		tl.clk.Advance(time.Second)
	}
	takeAll(tl) // pool 30
	tl.Signal(0)
	tl.clk.Advance(time.Second)
	// Cut to 15, then one slope a second while the schedule is at 35, 40...
	if got, want := pools(tl, 3), []float64{15, 20, 25}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pools after the cut: %v; want %v", got, want)
	}
	tl.clk.Advance(13 * time.Second) // no calls
	if got := tl.Status().Pool(); got != 95 {
		t.Errorf("pool 16 epochs after the cut: %v; want 95", got)
	}
	tl.clk.Advance(5 * time.Second)
	if got := tl.Status().Pool(); got != 100 {
		t.Errorf("pool 21 epochs after the cut: %v; want max, 100", got)
	}
}

func TestSignaled(t *testing.T) {
	at := func(ms int64) time.Time { return time.Unix(1_700_000_000, ms*int64(time.Millisecond)) }
	const e = 1_700_000_000
	for _, tt := range []struct {
		name string
		a    share.Adaptation
		s    share.Signal
		now  time.Time
		want share.Adaptation
	}{
		{"first cut applies from the epoch after the lead", share.Adaptation{},
			share.Signal{Epoch: e, Cut: true, Pool: 50_000, Lead: 200 * time.Millisecond}, at(300),
			share.Adaptation{From: e + 1, Pool: 50_000}},
		{"a lead past the next boundary waits one more epoch", share.Adaptation{},
			share.Signal{Epoch: e, Cut: true, Pool: 50_000, Lead: 200 * time.Millisecond}, at(850),
			share.Adaptation{From: e + 2, Pool: 50_000}},
		{"a signal before the last cut took effect cuts nothing", share.Adaptation{From: e + 1, Pool: 50_000},
			share.Signal{Epoch: e, Cut: true, Pool: 25_000}, at(900),
			share.Adaptation{From: e + 1, Pool: 50_000}},
		{"one in the cut's epoch cuts again", share.Adaptation{From: e + 1, Pool: 50_000},
			share.Signal{Epoch: e + 1, Cut: true, Pool: 25_000, Lead: 200 * time.Millisecond}, at(1_100),
			share.Adaptation{From: e + 2, Pool: 25_000}},
		{"a late signal applies after its own epoch", share.Adaptation{},
			share.Signal{Epoch: e + 3, Cut: true, Pool: 1_000}, at(100),
			share.Adaptation{From: e + 4, Pool: 1_000}},
		{"the pause only grows", share.Adaptation{PauseUntil: at(2_000)},
			share.Signal{Epoch: e, PauseUntil: at(1_500)}, at(100),
			share.Adaptation{PauseUntil: at(2_000)}},
		{"a later pause extends it", share.Adaptation{From: e, Pool: 7_000, PauseUntil: at(2_000)},
			share.Signal{Epoch: e, PauseUntil: at(2_500)}, at(100),
			share.Adaptation{From: e, Pool: 7_000, PauseUntil: at(2_500)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Signaled(tt.s, tt.now); got != tt.want {
				t.Errorf("Signaled = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestCutPercentageValidated(t *testing.T) {
	for _, pct := range []int{-1, 101} {
		cfg := adaptive(Relaxed)
		cfg.CutPercentage = pct
		var fe *FieldError
		if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "CutPercentage" {
			t.Errorf("CutPercentage %d: %v; want a FieldError for CutPercentage", pct, err)
		}
	}
}

func TestFreshAfter(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 250*int64(time.Millisecond)))
	l, err := New(Config{Max: 10}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	const e = 1_700_000_000
	for _, tt := range []struct {
		d, margin, want time.Duration
		epoch           int64
	}{
		{0, 0, 0, e},
		{time.Second, 200 * time.Millisecond, time.Second, e + 1},
		{550 * time.Millisecond, 200 * time.Millisecond, 550 * time.Millisecond, e},
		{551 * time.Millisecond, 200 * time.Millisecond, 750 * time.Millisecond, e + 1},
		{1700 * time.Millisecond, 200 * time.Millisecond, 1750 * time.Millisecond, e + 2},
		{-time.Second, 0, 0, e},
	} {
		got, epoch := l.FreshAfter(tt.d, tt.margin)
		if got != tt.want || epoch != tt.epoch {
			t.Errorf("FreshAfter(%v, %v) = %v, %d; want %v, %d", tt.d, tt.margin, got, epoch, tt.want, tt.epoch)
		}
		if got, epoch := l.Lane().FreshAfter(tt.d, tt.margin); got != tt.want || epoch != tt.epoch {
			t.Errorf("Lane().FreshAfter(%v, %v) = %v, %d", tt.d, tt.margin, got, epoch)
		}
	}
	if g, _ := l.TryAcquire(1); g.Epoch() != e {
		t.Errorf("grant of epoch %d; want %d", g.Epoch(), e)
	}
}
