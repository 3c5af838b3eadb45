package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Manual is a [Clock] that moves only when told. Timers fire synchronously, in the
// goroutine that moves the clock, in deadline order (and in creation order for equal
// deadlines), with the clock reading the timer's deadline while each one runs. A timer
// callback may create new timers; those due by the target time fire in the same
// call. A callback must not move the clock itself.
//
// Manual is safe for concurrent use. The zero value is not usable; call [NewManual].
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	pending []*manualTimer
	armed   chan struct{} // closed and cleared when a timer is armed; nil when nobody waits
	moving  sync.Mutex    // serialises Advance and Set so timers fire in order
}

type manualTimer struct {
	c    *Manual
	when time.Time
	seq  uint64
	f    func()
	done bool
}

// NewManual returns a Manual clock reading t.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's current reading.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the clock reaches Now()+d. With d <= 0 it runs
// at the next Advance or Set that does not move the clock back, even Advance(0).
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at(c.now.Add(d), f)
}

// AfterFuncAt schedules f to run when the clock reaches when. A when the
// clock has reached already runs f at once, in its own goroutine: the clock
// moved past it while the caller was about to schedule it.
func (c *Manual) AfterFuncAt(when time.Time, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !when.After(c.now) {
		go f()
		return &manualTimer{c: c, when: when, f: f, done: true}
	}
	return c.at(when, f)
}

// at schedules f at when. c.mu is held.
func (c *Manual) at(when time.Time, f func()) Timer {
	c.seq++
	t := &manualTimer{c: c, when: when, seq: c.seq, f: f}
	c.pending = append(c.pending, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return t
}

// Advance moves the clock by d, firing every timer that falls due. A negative d
// moves it back, as Set does.
func (c *Manual) Advance(d time.Duration) {
	c.moving.Lock()
	defer c.moving.Unlock()
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.runUntil(target)
}

// Set moves the clock to t, firing every timer due at or before t. Setting a time
// earlier than Now moves the clock back and fires only timers already due.
func (c *Manual) Set(t time.Time) {
	c.moving.Lock()
	defer c.moving.Unlock()
	c.runUntil(t)
}

// Pending reports how many timers are waiting to fire.
func (c *Manual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// BlockUntil blocks until at least n timers are pending (armed with AfterFunc and
// neither fired nor stopped), or until ctx is done, when it returns ctx's error. A
// test calls it to know that the code under test is waiting on the clock before it
// moves the clock.
func (c *Manual) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.armed == nil {
			c.armed = make(chan struct{})
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Manual) runUntil(target time.Time) {
	for {
		c.mu.Lock()
		t := c.nextDue(target)
		if t == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		if t.when.After(c.now) {
			c.now = t.when
		}
		t.done = true
		c.mu.Unlock()
		t.f()
	}
}

// nextDue removes and returns the earliest timer due at or before target. c.mu is held.
func (c *Manual) nextDue(target time.Time) *manualTimer {
	if len(c.pending) == 0 {
		return nil
	}
	sort.SliceStable(c.pending, func(i, j int) bool {
		a, b := c.pending[i], c.pending[j]
		if !a.when.Equal(b.when) {
			return a.when.Before(b.when)
		}
		return a.seq < b.seq
	})
	t := c.pending[0]
	if t.when.After(target) {
		return nil
	}
	c.pending = c.pending[1:]
	return t
}

// Stop cancels the timer if it has not fired.
func (t *manualTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	for i, p := range c.pending {
		if p == t {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			break
		}
	}
	return true
}
