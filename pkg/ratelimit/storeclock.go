package ratelimit

import (
	"sync/atomic"
	"time"
)

// storeClock maps readings of a replica's own clock to its store's clock, on
// which epochs are counted: store time = base's wall time + the time elapsed
// since base (by the monotonic clock when the reading has one) + offset.
//
// The offset is learned from syncs, NTP-fashion: a sync that sent its
// request at local t0 and had the reply at t1 saw the store's time at some
// instant between the two, so the offset it gives is known within half the
// round trip. A sample replaces the offset in use when it is at least as
// precise (its error, less the drift allowed since the last sample), or when
// the two cannot both be right: the local clock stepped. A slow reply (a
// delayed network, a store under load) so leaves a good offset alone, and a
// clock that jumped is followed at the first sync after the jump.
//
// The offset is read without a lock (Limiter.Epoch); samples are taken with
// the Limiter's mutex held.
type storeClock struct {
	base     time.Time
	baseNano int64
	offset   atomic.Int64 // store clock minus local clock, ns

	sampled bool
	errNs   int64     // how far offset may be off, at sampledAt
	at      time.Time // local time of the sample in use
}

// maxDrift is the rate at which two clocks are assumed to drift apart at
// most, in ns per second: 1 ms a second, far above what crystals do, so that
// an offset learned long ago is soon replaced by a fresh one.
const maxDrift = int64(time.Millisecond)

// clockResolution is added to every sample's error: the store's clock is
// read in microseconds, and the local one may be coarser.
const clockResolution = time.Millisecond

func newStoreClock(now time.Time) *storeClock {
	return &storeClock{base: now, baseNano: now.UnixNano()}
}

// nanos converts a local reading to store-clock nanoseconds.
func (c *storeClock) nanos(now time.Time) int64 {
	return c.baseNano + int64(now.Sub(c.base)) + c.offset.Load()
}

// epochAt returns the epoch (whole store-clock seconds) of a local reading.
func (c *storeClock) epochAt(now time.Time) int64 { return floorDiv(c.nanos(now), epochNanos) }

// localAt returns the local reading at which the store clock reads ns.
func (c *storeClock) localAt(ns int64) time.Time {
	return c.base.Add(time.Duration(ns - c.baseNano - c.offset.Load()))
}

// sample learns from a sync that sent its request at local t0, had its reply
// at t1 and read the store's clock as store. It returns how far the offset
// moved when the two could not both be right (the local clock stepped, or
// the store's did), and zero otherwise.
func (c *storeClock) sample(t0, t1, store time.Time) (stepped time.Duration) {
	rtt := max(t1.Sub(t0), 0)
	mid := t0.Add(rtt / 2)
	off := store.UnixNano() - (c.baseNano + int64(mid.Sub(c.base)))
	errNs := int64(rtt/2 + clockResolution)
	if !c.sampled {
		c.sampled = true
		c.set(off, errNs, t1)
		return 0
	}
	cur := c.offset.Load()
	aged := c.errNs + int64(max(t1.Sub(c.at), 0))/(int64(time.Second)/maxDrift)
	diff := off - cur
	switch {
	case abs(diff) > aged+errNs:
		c.set(off, errNs, t1)
		return time.Duration(diff)
	case errNs <= aged:
		c.set(off, errNs, t1)
	}
	return 0
}

func (c *storeClock) set(off, errNs int64, at time.Time) {
	c.offset.Store(off)
	c.errNs, c.at = errNs, at
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
