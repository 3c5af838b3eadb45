package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// granted takes all it can in each of n epochs and returns what each granted.
func granted(tl *testLimiter, n int) []int {
	var out []int
	for range n {
		out = append(out, takeAll(tl))
		tl.clk.Advance(time.Second)
	}
	return out
}

func flatLimit(max int64) Config { return Config{Max: max, Min: 1} }

// TestUpdateSwitchesAtTheNextEpoch changes a flat limit of 300 to 600 and
// then to 150: each change applies from the next epoch, whose pool is the
// smaller of the two limits, and the new limit holds from the epoch after.
func TestUpdateSwitchesAtTheNextEpoch(t *testing.T) {
	for _, m := range []Mode{Relaxed, Scheduled, OnlyIfUsed, GoBackN} {
		t.Run(m.String(), func(t *testing.T) {
			cfg := flatLimit(300)
			cfg.Mode, cfg.ThresholdPercentage = m, 50
			tl := newTestLimiter(t, cfg)
			got := granted(tl, 2)
			takeAll(tl) // a change in the middle of an epoch leaves it alone
			up := cfg
			up.Max = 600
			if err := tl.Update(up); err != nil {
				t.Fatal(err)
			}
			if s := tl.Status(); s.Max != 300 || s.Pool() != 300 {
				t.Fatalf("right after Update: max %d, pool %v; want 300 until the next epoch", s.Max, s.Pool())
			}
			tl.clk.Advance(time.Second)
			got = append(got, granted(tl, 3)...)
			down := cfg
			down.Max = 150
			if err := tl.Update(down); err != nil {
				t.Fatal(err)
			}
			got = append(got, granted(tl, 3)...)
			want := []int{300, 300, 300, 600, 600, 600, 150, 150}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("granted per epoch %v; want %v", got, want)
			}
		})
	}
}

// TestUpdateRampsToARaisedMax raises the max of a pool that ramps: the
// switching epoch keeps the pool it had, and the new ramp goes on from it
// with the new slope.
func TestUpdateRampsToARaisedMax(t *testing.T) {
	cfg := Config{Max: 100, Min: 10, RampUpDuration: 9 * time.Second} // slope 10
	tl := newTestLimiter(t, cfg)
	got := granted(tl, 3) // 10 20 30
	next := cfg
	next.Max, next.RampUpDuration = 200, 2*time.Second // slope 95
	if err := tl.Update(next); err != nil {
		t.Fatal(err)
	}
	takeAll(tl)
	got = append(got, 40)
	tl.clk.Advance(time.Second)
	got = append(got, granted(tl, 4)...)
	want := []int{10, 20, 30, 40, 50, 145, 200, 200}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("granted per epoch %v; want %v", got, want)
	}
}

// TestUpdateLowersMinAboveTheOldMax keeps the switching epoch under the old
// max even when the new min is above it.
func TestUpdateLowersMinAboveTheOldMax(t *testing.T) {
	tl := newTestLimiter(t, flatLimit(100))
	takeAll(tl)
	if err := tl.Update(Config{Max: 500, Min: 400, RampUpDuration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	tl.clk.Advance(time.Second)
	if got := granted(tl, 3); fmt.Sprint(got) != "[100 400 400]" {
		t.Errorf("granted per epoch %v; want [100 400 400]: the old max in the switch, then the new min", got)
	}
}

// TestUpdateRefusesWhatCannotChangeLive leaves the limit alone and names the
// setting.
func TestUpdateRefusesWhatCannotChangeLive(t *testing.T) {
	tl := newTestLimiter(t, flatLimit(100))
	bad := flatLimit(200)
	bad.Pacing = 100 * time.Millisecond
	err := tl.Update(bad)
	var nl *NotLiveError
	if !errors.Is(err, ErrNotLive) || !errors.As(err, &nl) || nl.Field != "Pacing" {
		t.Fatalf("Update with a new pacing = %v; want a NotLiveError naming Pacing", err)
	}
	if err := tl.Update(Config{Max: 0}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Update(max 0) = %v; want ErrInvalidConfig", err)
	}
	tl.clk.Advance(time.Second)
	if got := granted(tl, 2); fmt.Sprint(got) != "[100 100]" {
		t.Errorf("granted %v after refused updates; want [100 100]", got)
	}
}

// TestUpdateTurnsShadowOnAndOff switches a Gate between enforcing
// and shadow at epoch boundaries.
func TestUpdateTurnsShadowOnAndOff(t *testing.T) {
	tl := newTestLimiter(t, flatLimit(10))
	s := tl.Gate()
	take := func() (Grant, Reason) {
		g, r := s.TryAcquire(25)
		s.Settle(g, g.Tokens)
		return g, r
	}
	if g, _ := take(); g.Tokens != 10 {
		t.Fatalf("enforcing: granted %d of 25; want 10", g.Tokens)
	}
	if g, r := take(); g.Tokens != 0 || r != ReasonRateLimited {
		t.Fatalf("enforcing, share used: %d, %v; want 0, rate_limited", g.Tokens, r)
	}
	on := flatLimit(10)
	on.Shadow = true
	if err := tl.Update(on); err != nil {
		t.Fatal(err)
	}
	if g, _ := take(); g.Tokens != 0 {
		t.Fatalf("shadow before its epoch: granted %d; want 0", g.Tokens)
	}
	tl.clk.Advance(time.Second)
	if g, r := take(); g.Tokens != 25 || r != NotThrottled {
		t.Fatalf("in shadow: %d, %v; want 25, none", g.Tokens, r)
	}
	if st := tl.Status(); !st.Shadow || st.ShadowThrottled != 15 {
		t.Fatalf("status in shadow: shadow %v, throttled %d; want true, 15", st.Shadow, st.ShadowThrottled)
	}
	if err := tl.Update(flatLimit(10)); err != nil {
		t.Fatal(err)
	}
	tl.clk.Advance(time.Second)
	if g, _ := take(); g.Tokens != 10 {
		t.Fatalf("enforcing again: granted %d of 25; want 10", g.Tokens)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := s.Acquire(ctx, 1); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("enforcing Acquire with the share used = %v; want ErrRateLimited", err)
	}
}

// TestUpdateToTheSameLimitDoesNothing plans no switch.
func TestUpdateToTheSameLimitDoesNothing(t *testing.T) {
	var switched []int64
	tl := newTestLimiter(t, flatLimit(10), WithEpochObserver(func(s EpochSummary) {
		if s.Switched {
			switched = append(switched, s.Epoch)
		}
	}))
	if err := tl.Update(flatLimit(10)); err != nil {
		t.Fatal(err)
	}
	granted(tl, 3)
	if len(switched) != 0 {
		t.Errorf("epochs %v switched; want none", switched)
	}
}

func TestProposeLimit(t *testing.T) {
	now := time.Unix(100, 600_000_000)
	lead := 500 * time.Millisecond
	var ls []share.LiveLimit
	ls = share.ProposeLimit(ls, share.LimitChange{Spec: "a", Lead: lead}, now)
	if fmt.Sprint(ls) != "[{1 a 102}]" {
		t.Fatalf("first proposal: %v; want gen 1 from epoch 102 (100.6s + 0.5s is in 101)", ls)
	}
	if again := share.ProposeLimit(ls, share.LimitChange{Spec: "a", Lead: lead}, now.Add(5*time.Second)); fmt.Sprint(again) != fmt.Sprint(ls) {
		t.Fatalf("the same spec again: %v; want no change", again)
	}
	ls = share.ProposeLimit(ls, share.LimitChange{Spec: "b", Lead: lead}, now)
	ls = share.ProposeLimit(ls, share.LimitChange{Spec: "c", Lead: lead}, now)
	if fmt.Sprint(ls) != "[{2 b 103} {3 c 104}]" {
		t.Fatalf("two more at once: %v; want the last two, one epoch apart", ls)
	}
}

// TestConfigIsTheOneInForce reads Config before and after a live change
// takes effect.
func TestConfigIsTheOneInForce(t *testing.T) {
	tl := newTestLimiter(t, flatLimit(300))
	up := flatLimit(600)
	if err := tl.Update(up); err != nil {
		t.Fatal(err)
	}
	if got := tl.Config().Max; got != 300 {
		t.Errorf("Config().Max before the next epoch = %d, want 300", got)
	}
	tl.clk.Advance(time.Second)
	if got := tl.Config().Max; got != 600 {
		t.Errorf("Config().Max in the next epoch = %d, want 600", got)
	}
}
