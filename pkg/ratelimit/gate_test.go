package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// TestShadowGrantsAllAndCountsTheExcess: in shadow a reader asking for more
// than the limit gets everything at once; what it uses beyond the limiter's
// grants is counted exactly, per epoch and in all, and what it does not use
// is not.
func TestShadowGrantsAllAndCountsTheExcess(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var mu sync.Mutex
	var epochs []EpochSummary
	l, err := New(Config{Max: 10, Shadow: true}, WithClock(clk), WithEpochObserver(func(s EpochSummary) {
		mu.Lock()
		defer mu.Unlock()
		epochs = append(epochs, s)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	for _, s := range []*Gate{l.Gate(), l.Lane().Gate()} {
		t.Run("", func(t *testing.T) {
			clk.Advance(time.Second)
			before := l.Status().ShadowThrottled
			g, r := s.TryAcquire(8) // 8 of the limiter's 10
			if g.Tokens != 8 || r != NotThrottled {
				t.Fatalf("TryAcquire(8) = %d, %v", g.Tokens, r)
			}
			s.Settle(g, 8)
			g, _ = s.TryAcquire(8) // 2 of the limiter's, 6 in shadow
			if g.Tokens != 8 {
				t.Fatalf("second TryAcquire(8) = %d; want 8", g.Tokens)
			}
			s.Settle(g, 5) // 2 real and 3 in shadow used
			g, err := s.Acquire(context.Background(), 5)
			if err != nil || g.Tokens != 5 {
				t.Fatalf("Acquire(5) = %d, %v; want 5 at once", g.Tokens, err)
			}
			s.Settle(g, 0) // none used
			g, _ = s.TryAcquire(4)
			s.Settle(g, 4) // 7 in shadow in all
			if got := l.Status().ShadowThrottled - before; got != 7 {
				t.Fatalf("shadow throttled %d; want 7", got)
			}
			if st := l.Status(); st.Granted != 10 {
				t.Fatalf("the limiter granted %d; want its 10", st.Granted)
			}
		})
	}
	clk.Advance(time.Second)
	mu.Lock()
	defer mu.Unlock()
	var shadow []int64
	for _, e := range epochs[len(epochs)-2:] {
		shadow = append(shadow, e.ShadowThrottled)
	}
	if shadow[0] != 7 || shadow[1] != 7 {
		t.Fatalf("epochs shadow-throttled %v; want [7 7]", shadow)
	}
}

// TestShadowCountsAGrantInItsEpoch: tokens kept in shadow count in the
// epoch that granted them, and in all; a grant settled after its epoch ended
// counts in all only.
func TestShadowCountsAGrantInItsEpoch(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var epochs []EpochSummary
	l, err := New(Config{Max: 10, Shadow: true}, WithClock(clk), WithEpochObserver(func(s EpochSummary) {
		epochs = append(epochs, s)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	s := l.Gate()
	g, _ := s.TryAcquire(15) // 10 real, 5 in shadow
	s.Settle(g, 15)
	late, _ := s.TryAcquire(4) // all in shadow
	clk.Advance(time.Second)
	s.Settle(late, 4)
	if st := l.Status(); st.ShadowThrottled != 9 {
		t.Fatalf("shadow throttled %d in all; want 9", st.ShadowThrottled)
	}
	if len(epochs) != 1 || epochs[0].ShadowThrottled != 5 {
		t.Fatalf("epochs %+v; want one with 5 throttled in shadow", epochs)
	}
}

func TestGateGivesUnusedRealTokensBack(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Max: 10, Shadow: true}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	s := l.Gate()
	g, _ := s.TryAcquire(15) // 10 real, 5 shadow
	g = s.Settle(g, 3)       // 3 real used, 7 back
	if st := l.Status(); st.ShadowThrottled != 0 || st.Granted != 3 {
		t.Fatalf("shadow %d, granted %d; want 0 and 3", st.ShadowThrottled, st.Granted)
	}
	s.Settle(g, 1) // 2 of the 3 kept given back (dropped messages)
	if g, _ := l.TryAcquire(10); g.Tokens != 9 {
		t.Fatalf("the limiter has %d left; want the 9 given back", g.Tokens)
	}
}

// TestSettleAgainGivesShadowTokensBack: a grant kept in shadow and settled
// again with fewer used (dropped messages) no longer counts those.
func TestSettleAgainGivesShadowTokensBack(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	l, err := New(Config{Max: 10, Shadow: true}, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	s := l.Gate()
	g, _ := s.TryAcquire(16) // 10 real, 6 in shadow
	g = s.Settle(g, 14)      // 2 in shadow back, 4 kept
	if st := l.Status(); st.ShadowThrottled != 4 || st.Granted != 10 {
		t.Fatalf("shadow %d, granted %d; want 4 and 10", st.ShadowThrottled, st.Granted)
	}
	s.Settle(g, 8) // 6 back: the 4 in shadow, then 2 real
	if st := l.Status(); st.ShadowThrottled != 0 || st.Granted != 8 {
		t.Fatalf("after settling again: shadow %d, granted %d; want 0 and 8", st.ShadowThrottled, st.Granted)
	}
}
