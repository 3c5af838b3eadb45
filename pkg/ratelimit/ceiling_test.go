package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// issueConfig is the limit of the quota measurements in docs/throttling.md: 20 to 400 over 10s
// (slopes of 38), relaxed, cut by 20%, the ceiling's defaults.
func issueConfig() Config {
	c := DefaultConfig(400)
	c.Min, c.RampUpDuration, c.Adaptive, c.CutPercentage = 20, 10*time.Second, true, 20
	return c
}

// quotaRun drives a limiter on the manual clock against a downstream that
// accepts quota(e) requests in epoch e and refuses the rest, which signals
// once per epoch. It returns what was accepted and refused in each epoch.
func quotaRun(t *testing.T, cfg Config, epochs int, quota func(e int) int64) (accepted, refused []int64) {
	t.Helper()
	tl := newTestLimiter(t, cfg)
	for e := range epochs {
		got := int64(takeAll(tl))
		q := quota(e)
		accepted = append(accepted, min(got, q))
		refused = append(refused, max(got-q, 0))
		if got > q {
			tl.Signal(0)
		}
		tl.clk.Advance(time.Second)
	}
	return accepted, refused
}

func TestCapAt(t *testing.T) {
	cfg := issueConfig()
	cfg.ProbeAfter = 10 * time.Second
	q := newTestQuota(cfg)
	q.learn(150_000, 0, 120_000, 10)
	if q.probing(40) {
		t.Error("probing before the pool was at the hold")
	}
	q.recordHeld(12, 149_000) // at the hold: probing may begin
	for _, tt := range []struct {
		e    int64
		want int64 // milli-tokens; -1 for no cap
	}{
		{10, 120_000},         // the cut's epoch
		{11, 149_000 - 3_625}, // an eighth of the 29 left to the hold
		{12, 149_000},         // the hold: 1% below, in whole tokens
		{19, 149_000},
		{20, 149_000 + 1_000},   // probing: one gap
		{21, 149_000 + 5*1_000}, // then 5, 21, ... gaps
		{22, 149_000 + 21*1_000},
		{69, -1}, // forgotten after 60s
	} {
		got, ok := q.capAt(tt.e)
		if !ok {
			got = -1
		}
		if got != tt.want {
			t.Errorf("capAt(%d) = %d; want %d", tt.e, got, tt.want)
		}
	}
}

// TestCeilingSettlesBelowAQuota runs the measured fixed window of 150 a second
// for 120 epochs: after 15 epochs of settling, at least 98% of the quota is
// used and at most 1% of what is sent is refused.
func TestCeilingSettlesBelowAQuota(t *testing.T) {
	acc, ref := quotaRun(t, issueConfig(), 120, func(int) int64 { return 150 })
	acc, ref = acc[15:], ref[15:]
	used := float64(sum(acc)) / float64(150*len(acc))
	refused := float64(sum(ref)) / float64(sum(acc)+sum(ref))
	t.Logf("used %.1f%%, refused %.2f%%", 100*used, 100*refused)
	if used < 0.98 || refused > 0.01 {
		t.Errorf("used %.1f%% of the quota, refused %.2f%%; want >= 98%% and <= 1%%\naccepted %v\nrefused %v",
			100*used, 100*refused, acc, ref)
	}
}

// TestCeilingFollowsAQuotaThatChanges drops the quota from 150 to 75 at
// epoch 20 and raises it back at epoch 40: the limit settles within 5
// epochs of the drop and within ProbeAfter and 8 of the rise (it finds a
// higher quota when it probes, at worst ProbeAfter after a probe just
// before the rise, and then takes a few epochs to climb and settle), and at most 3% of what is sent after the
// first 15 epochs is refused (each request over the quota counts, as
// though the sender sent them all: a sink that stops a batch at its first
// refusal, and a Retry-After, send fewer). Settled is the first epoch from which, over
// the next 10, at most 2% of the quota is refused in each and at least 95%
// of it is accepted in all.
func TestCeilingFollowsAQuotaThatChanges(t *testing.T) {
	quota := func(e int) int64 {
		if e >= 20 && e < 40 {
			return 75
		}
		return 150
	}
	cfg := issueConfig()
	acc, ref := quotaRun(t, cfg, 80, quota)
	refused := float64(sum(ref[15:])) / float64(sum(acc[15:])+sum(ref[15:]))
	t.Logf("accepted %v", acc)
	t.Logf("refused %v (%.2f%% after epoch 15)", ref, 100*refused)
	settledAt := func(from int) int {
		for e := from; e+10 <= len(acc); e++ {
			var a, q int64
			ok := true
			for i := e; i < e+10; i++ {
				a, q = a+acc[i], q+quota(i)
				ok = ok && ref[i]*100 <= 2*quota(i)
			}
			if ok && a*100 >= 95*q {
				return e
			}
		}
		return -1
	}
	probe := int(cfg.ProbeAfter / time.Second)
	for _, c := range []struct{ change, within int }{{20, 5}, {40, probe + 8}} {
		if e := settledAt(c.change); e < 0 || e-c.change > c.within {
			t.Errorf("after the change at epoch %d: settled at epoch %d; want within %d", c.change, e, c.within)
		}
	}
	if refused > 0.03 {
		t.Errorf("refused %.2f%%; want at most 3%%", 100*refused)
	}
}

// TestCeilingNeverSignaledReachesMax: an endpoint that never signals gets
// max, and no epoch's pool exceeds it.
func TestCeilingNeverSignaledReachesMax(t *testing.T) {
	acc, _ := quotaRun(t, issueConfig(), 15, func(int) int64 { return 1_000 })
	if got := fmt.Sprint(acc[10:]); got != "[400 400 400 400 400]" {
		t.Errorf("accepted after the ramp: %s; want 400 each", got)
	}
}

// TestSignalUnavailableKeepsTheCeiling: after settling below a quota of
// 150, three epochs of "unavailable" signals cut the pool, but it climbs
// back to the hold below the ceiling learnt before, not to one learnt in
// the outage, and probes it again one epoch in three.
func TestSignalUnavailableKeepsTheCeiling(t *testing.T) {
	tl := newTestLimiter(t, issueConfig())
	var pools []int64
	for e := range 30 {
		got := int64(takeAll(tl))
		pools = append(pools, got)
		switch {
		case e >= 16 && e < 19:
			tl.SignalUnavailable(time.Second)
		case got > 150:
			tl.Signal(0)
		}
		tl.clk.Advance(time.Second)
	}
	if got := fmt.Sprint(pools[12:26]); got != "[150 151 150 150 151 120 96 76 114 150 151 150 150 151]" {
		t.Errorf("granted from epoch 12: %s; want the outage's cuts, then back to 150 in two epochs", got)
	}
}

// TestCapAtPaced checks that, paced, the probes above the hold climb by 1,
// 3, 6, 10... gaps, so that a reserve that hides an overshoot hides a
// small one, and that each probe refused paced doubles the wait for the
// next, up to half of ForgetAfter.
func TestCapAtPaced(t *testing.T) {
	cfg := issueConfig()
	q := newTestQuota(cfg)
	q.paced = true
	q.learn(150_000, 0, 120_000, 10)
	q.recordHeld(12, 149_000)
	for _, tt := range []struct{ e, want int64 }{
		{12, 149_000},
		{13, 149_000 + 1_000}, // ProbeAfter (2s) from the cut, an epoch at the hold
		{14, 149_000 + 3_000},
		{15, 149_000 + 6_000},
		{16, 149_000 + 10_000},
		{30, 149_000 + 171_000}, // j = 18
	} {
		if got, ok := q.capAt(tt.e); !ok || got != tt.want {
			t.Errorf("capAt(%d) = %d, %v; want %d", tt.e, got, ok, tt.want)
		}
	}
	// Refused at the probes of epochs 15, and then of later ones: the wait
	// from the cut doubles, 4, 8, 16, 30, 30 epochs.
	e := int64(15)
	for _, wait := range []int64{4, 8, 16, 30, 30} {
		if !q.probing(e) {
			t.Fatalf("epoch %d: not probing", e)
		}
		q.learn(150_000, 0, 149_000, e+1)
		q.recordHeld(e+1, 149_000)
		if q.probing(e+wait) || !q.probing(e+1+wait) {
			t.Fatalf("cut at %d: probing at %d, %v, at %d, %v; want from %d", e+1,
				e+wait, q.probing(e+wait), e+1+wait, q.probing(e+1+wait), e+1+wait)
		}
		e += 1 + wait
	}
	// Unpaced, a refused probe does not back off.
	q.paced = false
	q.learn(150_000, 0, 149_000, e+1)
	q.recordHeld(e+1, 149_000)
	if !q.probing(e + 3) {
		t.Errorf("unpaced: not probing 2 epochs after the cut")
	}
}

// TestSignalUnderACeilingFallsBack: under a learnt ceiling, a signal at a
// pool above the one that passed the epoch before falls back to that pool
// instead of cutting by CutPercentage, and one at the pool that passed (a
// quota that dropped) cuts.
func TestSignalUnderACeilingFallsBack(t *testing.T) {
	cfg := issueConfig()
	cfg.ProbeAfter = time.Minute
	tl := newTestLimiter(t, cfg)
	var got []int64
	quota := int64(150)
	for e := 0; e < 40; e++ {
		n := int64(takeAll(tl))
		got = append(got, n)
		if e == 30 {
			quota = 100
		}
		if n > quota {
			tl.Signal(0)
		}
		tl.clk.Advance(time.Second)
	}
	signals := 0
	for e := 1; e+1 < len(got); e++ {
		if got[e] <= 150 && !(e >= 30 && got[e] > 100) {
			continue
		}
		signals++
		switch {
		case e >= 30 && got[e] == got[e-1]:
			if want := got[e] * 80 / 100; got[e+1] != want {
				t.Errorf("epoch %d: a signal at %d, the pool that passed, cut to %d; want %d\n%v", e, got[e], got[e+1], want, got)
			}
			return
		case signals > 1 && got[e-1] <= 150:
			if got[e+1] != got[e-1] {
				t.Errorf("epoch %d: a signal at %d under a ceiling cut to %d; want %d, the pool that passed\n%v", e, got[e], got[e+1], got[e-1], got)
			}
		}
	}
	t.Errorf("no signal at the pool that passed: %v", got)
}
