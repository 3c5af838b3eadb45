package clock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// t0 is where every manual clock in these tests starts.
var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func TestManualNow(t *testing.T) {
	tests := []struct {
		name string
		move func(c *Manual)
		want time.Time
	}{
		{"new clock reads its start", func(c *Manual) {}, t0},
		{"advance", func(c *Manual) { c.Advance(time.Second) }, at(time.Second)},
		{"advance twice adds up", func(c *Manual) {
			c.Advance(1500 * time.Millisecond)
			c.Advance(2500 * time.Millisecond)
		}, at(4 * time.Second)},
		{"advance zero", func(c *Manual) { c.Advance(0) }, t0},
		{"advance by a nanosecond", func(c *Manual) { c.Advance(time.Nanosecond) }, at(time.Nanosecond)},
		{"set forward", func(c *Manual) { c.Set(at(time.Hour)) }, at(time.Hour)},
		{"set to now", func(c *Manual) { c.Set(t0) }, t0},
		{"set back", func(c *Manual) { c.Set(at(-time.Minute)) }, at(-time.Minute)},
		{"advance after set", func(c *Manual) {
			c.Set(at(time.Minute))
			c.Advance(time.Second)
		}, at(time.Minute + time.Second)},
		{"set after advance", func(c *Manual) {
			c.Advance(time.Hour)
			c.Set(at(time.Second))
		}, at(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewManual(t0)
			tt.move(c)
			if got := c.Now(); !got.Equal(tt.want) {
				t.Fatalf("Now() = %v, want %v", got, tt.want)
			}
		})
	}
}

// firing is one timer callback as observed by the tests: which timer ran and what
// the clock read while it ran.
type firing struct {
	id  int
	now time.Time
}

func TestManualFiresInOrder(t *testing.T) {
	tests := []struct {
		name    string
		delays  []time.Duration // one timer per entry, created in this order
		advance time.Duration
		want    []int // ids (indexes into delays) in firing order
	}{
		{"deadline order", []time.Duration{3 * time.Second, time.Second, 2 * time.Second}, 5 * time.Second, []int{1, 2, 0}},
		{"equal deadlines in creation order", []time.Duration{time.Second, time.Second, time.Second, time.Second}, time.Second, []int{0, 1, 2, 3}},
		{"mixed deadlines and ties", []time.Duration{2 * time.Second, time.Second, 2 * time.Second, time.Second, 3 * time.Second}, 3 * time.Second, []int{1, 3, 0, 2, 4}},
		{"deadline at the target fires", []time.Duration{2 * time.Second}, 2 * time.Second, []int{0}},
		{"deadline past the target waits", []time.Duration{time.Second, 2 * time.Second, 1500 * time.Millisecond}, 1500 * time.Millisecond, []int{0, 2}},
		{"nothing due", []time.Duration{time.Second}, time.Second - time.Nanosecond, nil},
		{"nanosecond apart", []time.Duration{time.Second + time.Nanosecond, time.Second}, 2 * time.Second, []int{1, 0}},
		{"zero delays in creation order", []time.Duration{0, 0, 0}, 0, []int{0, 1, 2}},
		{"negative delay is an earlier deadline than zero", []time.Duration{0, -time.Second, time.Second}, time.Second, []int{1, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewManual(t0)
			var got []firing
			for i, d := range tt.delays {
				c.AfterFunc(d, func() { got = append(got, firing{i, c.Now()}) })
			}
			c.Advance(tt.advance)

			var ids []int
			for _, f := range got {
				ids = append(ids, f.id)
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("fired %v, want %v", ids, tt.want)
			}
			// While a callback runs the clock reads its deadline, or the time of the
			// Advance call for a deadline already past.
			for _, f := range got {
				want := at(max(tt.delays[f.id], 0))
				if !f.now.Equal(want) {
					t.Errorf("timer %d (delay %v) saw Now() = %v, want %v", f.id, tt.delays[f.id], f.now, want)
				}
			}
			if got, want := c.Now(), at(tt.advance); !got.Equal(want) {
				t.Errorf("Now() after Advance = %v, want %v", got, want)
			}
			if got, want := c.Pending(), len(tt.delays)-len(tt.want); got != want {
				t.Errorf("Pending() = %d, want %d", got, want)
			}
		})
	}
}

func TestManualSetFiresDueTimers(t *testing.T) {
	c := NewManual(t0)
	var got []firing
	for i, d := range []time.Duration{4 * time.Second, 2 * time.Second, 6 * time.Second} {
		c.AfterFunc(d, func() { got = append(got, firing{i, c.Now()}) })
	}
	c.Set(at(5 * time.Second))
	want := []firing{{1, at(2 * time.Second)}, {0, at(4 * time.Second)}}
	if !slices.Equal(got, want) {
		t.Fatalf("Set fired %v, want %v", got, want)
	}
	if !c.Now().Equal(at(5 * time.Second)) {
		t.Fatalf("Now() = %v after Set", c.Now())
	}

	// Moving back fires nothing that is not yet due, and the remaining timer keeps
	// its absolute deadline.
	got = nil
	c.Set(at(time.Second))
	if len(got) != 0 || c.Pending() != 1 {
		t.Fatalf("Set back fired %v, Pending() = %d; want nothing fired, 1 pending", got, c.Pending())
	}
	c.Advance(5 * time.Second)
	if want := []firing{{2, at(6 * time.Second)}}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestManualNowDuringCallbackAcrossCalls(t *testing.T) {
	// A timer due in the middle of several Advance calls reads its own deadline,
	// not the start or the end of the Advance that fires it.
	c := NewManual(t0)
	var seen []time.Time
	c.AfterFunc(2500*time.Millisecond, func() { seen = append(seen, c.Now()) })
	for range 3 {
		c.Advance(time.Second)
	}
	if want := []time.Time{at(2500 * time.Millisecond)}; !slices.Equal(seen, want) {
		t.Fatalf("callback saw %v, want %v", seen, want)
	}
	if !c.Now().Equal(at(3 * time.Second)) {
		t.Fatalf("Now() = %v, want %v", c.Now(), at(3*time.Second))
	}
}

func TestManualCallbackSchedulesTimer(t *testing.T) {
	tests := []struct {
		name        string
		first       time.Duration // delay of the timer created up front
		second      time.Duration // delay of the timer its callback creates
		advance     time.Duration
		wantFired   []firing
		wantPending int
	}{
		{
			name: "due before the target fires in the same advance",
			// second is due at 1s+2s = 3s.
			first: time.Second, second: 2 * time.Second, advance: 5 * time.Second,
			wantFired: []firing{{0, at(time.Second)}, {1, at(3 * time.Second)}},
		},
		{
			name:  "due at the target fires in the same advance",
			first: time.Second, second: 4 * time.Second, advance: 5 * time.Second,
			wantFired: []firing{{0, at(time.Second)}, {1, at(5 * time.Second)}},
		},
		{
			name:  "zero delay fires at the same instant",
			first: time.Second, second: 0, advance: 5 * time.Second,
			wantFired: []firing{{0, at(time.Second)}, {1, at(time.Second)}},
		},
		{
			name:  "zero delay fires in advance zero",
			first: 0, second: 0, advance: 0,
			wantFired: []firing{{0, t0}, {1, t0}},
		},
		{
			name:  "due after the target waits",
			first: time.Second, second: 5 * time.Second, advance: 5 * time.Second,
			wantFired:   []firing{{0, at(time.Second)}},
			wantPending: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewManual(t0)
			var got []firing
			c.AfterFunc(tt.first, func() {
				got = append(got, firing{0, c.Now()})
				c.AfterFunc(tt.second, func() { got = append(got, firing{1, c.Now()}) })
			})
			c.Advance(tt.advance)
			if !slices.Equal(got, tt.wantFired) {
				t.Fatalf("fired %v, want %v", got, tt.wantFired)
			}
			if c.Pending() != tt.wantPending {
				t.Fatalf("Pending() = %d, want %d", c.Pending(), tt.wantPending)
			}
		})
	}
}

func TestManualCallbackTimerInterleaves(t *testing.T) {
	// A timer created by a callback takes its place among the timers already
	// pending: here it is due at 2s, between the ones at 1s and 3s.
	c := NewManual(t0)
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "c@"+c.Now().Sub(t0).String()) })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a@"+c.Now().Sub(t0).String())
		c.AfterFunc(time.Second, func() { got = append(got, "b@"+c.Now().Sub(t0).String()) })
	})
	c.Advance(10 * time.Second)
	if want := []string{"a@1s", "b@2s", "c@3s"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestManualCallbackChain(t *testing.T) {
	// A ticker built from AfterFunc: each callback schedules the next one second
	// later. One Advance runs every tick up to and including the target.
	c := NewManual(t0)
	var ticks []time.Time
	var tick func()
	tick = func() {
		ticks = append(ticks, c.Now())
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(5 * time.Second)
	want := []time.Time{at(1 * time.Second), at(2 * time.Second), at(3 * time.Second), at(4 * time.Second), at(5 * time.Second)}
	if !slices.Equal(ticks, want) {
		t.Fatalf("ticks at %v, want %v", ticks, want)
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending() = %d, want the next tick", c.Pending())
	}
}

func TestManualStop(t *testing.T) {
	t.Run("before firing", func(t *testing.T) {
		c := NewManual(t0)
		ran := false
		tm := c.AfterFunc(time.Second, func() { ran = true })
		if !tm.Stop() {
			t.Fatal("Stop() before firing = false, want true")
		}
		if c.Pending() != 0 {
			t.Fatalf("Pending() = %d after Stop, want 0", c.Pending())
		}
		c.Advance(time.Hour)
		if ran {
			t.Fatal("stopped timer ran")
		}
		if tm.Stop() {
			t.Fatal("second Stop() = true, want false")
		}
	})
	t.Run("after firing", func(t *testing.T) {
		c := NewManual(t0)
		runs := 0
		tm := c.AfterFunc(time.Second, func() { runs++ })
		c.Advance(time.Second)
		if tm.Stop() {
			t.Fatal("Stop() after firing = true, want false")
		}
		c.Advance(time.Hour)
		if runs != 1 {
			t.Fatalf("callback ran %d times, want 1", runs)
		}
	})
	t.Run("zero delay before advance", func(t *testing.T) {
		c := NewManual(t0)
		ran := false
		tm := c.AfterFunc(0, func() { ran = true })
		if !tm.Stop() {
			t.Fatal("Stop() = false, want true")
		}
		c.Advance(0)
		if ran {
			t.Fatal("stopped timer ran")
		}
	})
	t.Run("only the stopped timer", func(t *testing.T) {
		c := NewManual(t0)
		var got []int
		var timers []Timer
		for i := range 3 {
			timers = append(timers, c.AfterFunc(time.Second, func() { got = append(got, i) }))
		}
		if !timers[1].Stop() {
			t.Fatal("Stop() = false, want true")
		}
		c.Advance(time.Second)
		if want := []int{0, 2}; !slices.Equal(got, want) {
			t.Fatalf("fired %v, want %v", got, want)
		}
	})
	t.Run("own timer from its callback", func(t *testing.T) {
		c := NewManual(t0)
		var tm Timer
		stopped := true
		tm = c.AfterFunc(time.Second, func() { stopped = tm.Stop() })
		c.Advance(time.Second)
		if stopped {
			t.Fatal("Stop() from the timer's own callback = true, want false")
		}
	})
	t.Run("later timer from an earlier callback", func(t *testing.T) {
		c := NewManual(t0)
		ranLater := false
		later := c.AfterFunc(2*time.Second, func() { ranLater = true })
		stopped := false
		c.AfterFunc(time.Second, func() { stopped = later.Stop() })
		c.Advance(5 * time.Second)
		if !stopped {
			t.Fatal("Stop() of a pending timer from a callback = false, want true")
		}
		if ranLater {
			t.Fatal("timer stopped in the same Advance still ran")
		}
		if c.Pending() != 0 {
			t.Fatalf("Pending() = %d, want 0", c.Pending())
		}
	})
}

func TestManualAfterFuncNonPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Nanosecond, -time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			c := NewManual(t0)
			runs := 0
			var seen time.Time
			c.AfterFunc(d, func() { runs++; seen = c.Now() })
			if runs != 0 {
				t.Fatal("AfterFunc ran its callback before the clock moved")
			}
			if c.Pending() != 1 {
				t.Fatalf("Pending() = %d, want 1", c.Pending())
			}
			c.Advance(0)
			if runs != 1 {
				t.Fatalf("callback ran %d times after Advance(0), want 1", runs)
			}
			if !seen.Equal(t0) {
				t.Fatalf("callback saw Now() = %v, want %v (the clock never runs backwards to a past deadline)", seen, t0)
			}
			if !c.Now().Equal(t0) {
				t.Fatalf("Now() = %v after Advance(0), want %v", c.Now(), t0)
			}
			c.Advance(time.Hour)
			if runs != 1 {
				t.Fatalf("callback ran %d times, want 1", runs)
			}
		})
	}
	t.Run("set to now", func(t *testing.T) {
		c := NewManual(t0)
		ran := false
		c.AfterFunc(0, func() { ran = true })
		c.Set(c.Now())
		if !ran {
			t.Fatal("zero-delay timer did not run on Set(Now())")
		}
	})
}

func TestManualPending(t *testing.T) {
	c := NewManual(t0)
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"new clock", func() {}, 0},
		{"three timers", func() {
			c.AfterFunc(time.Second, func() {})
			c.AfterFunc(2*time.Second, func() {})
			c.AfterFunc(3*time.Second, func() {})
		}, 3},
		{"advance past the first", func() { c.Advance(time.Second) }, 2},
		{"add and stop one", func() { c.AfterFunc(time.Minute, func() {}).Stop() }, 2},
		{"zero delay", func() { c.AfterFunc(0, func() {}) }, 3},
		{"advance zero fires the zero delay", func() { c.Advance(0) }, 2},
		{"advance past all", func() { c.Advance(time.Hour) }, 0},
		{"callback adds one", func() {
			c.AfterFunc(time.Second, func() { c.AfterFunc(time.Hour, func() {}) })
			c.Advance(time.Second)
		}, 1},
	}
	for _, s := range steps {
		s.do()
		if got := c.Pending(); got != s.want {
			t.Fatalf("after %s: Pending() = %d, want %d", s.name, got, s.want)
		}
	}
}

func TestManualPendingDuringCallback(t *testing.T) {
	// The timer that is running no longer counts as pending; the ones after it do.
	c := NewManual(t0)
	var seen []int
	for range 3 {
		c.AfterFunc(time.Second, func() { seen = append(seen, c.Pending()) })
	}
	c.Advance(time.Second)
	if want := []int{2, 1, 0}; !slices.Equal(seen, want) {
		t.Fatalf("Pending() in callbacks = %v, want %v", seen, want)
	}
}

func TestManualConcurrentUse(t *testing.T) {
	const n = 50
	c := NewManual(t0)
	var (
		mu    sync.Mutex
		fired int
		wg    sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			_ = c.Now()
			c.AfterFunc(time.Second, func() {
				mu.Lock()
				fired++
				mu.Unlock()
			})
			_ = c.Pending()
		})
	}
	wg.Wait()
	if c.Pending() != n {
		t.Fatalf("Pending() = %d, want %d", c.Pending(), n)
	}
	for range 4 {
		wg.Go(func() { c.Advance(time.Second) })
	}
	wg.Wait()
	if fired != n {
		t.Fatalf("%d timers fired, want %d", fired, n)
	}
	if got, want := c.Now(), at(4*time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
}

func TestManualBlockUntil(t *testing.T) {
	t.Run("already pending", func(t *testing.T) {
		c := NewManual(t0)
		c.AfterFunc(time.Second, func() {})
		c.AfterFunc(time.Second, func() {})
		for n := range 3 {
			if err := c.BlockUntil(context.Background(), n); err != nil {
				t.Fatalf("BlockUntil(%d) with 2 pending = %v", n, err)
			}
		}
	})
	t.Run("wakes when timers are armed", func(t *testing.T) {
		c := NewManual(t0)
		done := make(chan error, 1)
		go func() { done <- c.BlockUntil(context.Background(), 2) }()
		c.AfterFunc(time.Second, func() {})
		c.AfterFunc(time.Second, func() {})
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("BlockUntil(2) = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("BlockUntil(2) did not return after two timers were armed")
		}
	})
	t.Run("fired and stopped timers do not count", func(t *testing.T) {
		c := NewManual(t0)
		c.AfterFunc(time.Second, func() {})
		c.AfterFunc(time.Hour, func() {}).Stop()
		c.Advance(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.BlockUntil(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("BlockUntil(1) with none pending = %v, want context.Canceled", err)
		}
	})
	t.Run("gives up when ctx ends", func(t *testing.T) {
		c := NewManual(t0)
		c.AfterFunc(time.Second, func() {})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if err := c.BlockUntil(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("BlockUntil(2) with one pending = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestManualImplementsClock(t *testing.T) {
	var _ Clock = NewManual(t0)
}

func TestRealAfterFuncFires(t *testing.T) {
	c := Real()
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("Real().Now() = %v, before time.Now() = %v", now, before)
	}
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Real().AfterFunc did not fire within 10s")
	}

	stopped := c.AfterFunc(time.Hour, func() { t.Error("stopped real timer ran") })
	if !stopped.Stop() {
		t.Fatal("Stop() of a pending real timer = false, want true")
	}
}

// TestSleepUntilAClockMovedPast: a SleepUntil for a time the clock has passed
// returns at once, and one for a later time returns when the clock reaches
// it, not a period after: the wait is for a time, not a duration read from a
// clock that may move before the timer is set.
func TestSleepUntilAClockMovedPast(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	c := NewManual(start)
	c.Advance(time.Second) // moved before the caller scheduled its wait
	if !SleepUntil(context.Background(), c, start.Add(time.Second)) {
		t.Fatal("SleepUntil a time reached returned false")
	}
	done := make(chan bool, 1)
	go func() { done <- SleepUntil(context.Background(), c, start.Add(2*time.Second)) }()
	if err := c.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if !<-done {
		t.Fatal("SleepUntil returned false when the clock reached its time")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if SleepUntil(ctx, c, start.Add(time.Hour)) {
		t.Fatal("SleepUntil with a context done returned true")
	}
	if SleepUntil(ctx, Real(), time.Now().Add(time.Hour)) {
		t.Fatal("SleepUntil on the real clock with a context done returned true")
	}
}
