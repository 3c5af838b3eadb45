// Package clock is the source of time for sluice's throttling and forwarding code.
//
// Code that waits or measures takes a [Clock] instead of calling the time package
// directly, so that tests and `vertex simulate` can drive it with a [Manual] clock
// that moves only when told.
//
// # Clocks
//
// [Real] is the wall clock with Go's runtime timers. [Manual] starts at a given time
// and fires its timers, in deadline order and in the caller's goroutine, when
// [Manual.Advance] or [Manual.Set] moves it past their deadlines; a test learns that
// the code under test is waiting on it with [Manual.BlockUntil].
package clock

import (
	"context"
	"time"
)

// Clock tells the time and runs functions after a delay.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f once, in its own goroutine for real clocks, after d has
	// elapsed. A d of zero or less runs f as soon as the clock allows.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by [Clock.AfterFunc].
type Timer interface {
	// Stop cancels the call. It reports whether the call was cancelled; false
	// means f has already run or been started.
	Stop() bool
}

// Real returns the wall clock backed by the time package.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// SleepUntil waits on c until t, or until ctx is done, and reports whether t
// came. A clock that schedules at a time of its own ([Manual]) is asked to, so
// that a clock moved between reading the time and scheduling cannot make the
// wait longer than until t.
func SleepUntil(ctx context.Context, c Clock, t time.Time) bool {
	at, ok := c.(interface {
		AfterFuncAt(t time.Time, f func()) Timer
	})
	if !ok {
		return Sleep(ctx, c, t.Sub(c.Now()))
	}
	done := make(chan struct{})
	tm := at.AfterFuncAt(t, func() { close(done) })
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// Sleep waits d on c, or until ctx is done, and reports whether d passed.
// A d of 0 or less passes at once unless ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
