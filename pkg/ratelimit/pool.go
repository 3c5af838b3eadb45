package ratelimit

import (
	"math"
	"runtime"
	"sync/atomic"
)

// epochState is one epoch of one replica: its share and where the share's tokens
// are. Every token of the epoch's allowance is in exactly one place: the common
// counter, one lane's stripe, or granted to a caller. Counters are taken down with
// one atomic add; a take that goes below zero is settled by adding back what did not
// fit, so a counter can read negative for a moment but no token is granted twice.
//
// Only the counters, called and slice change after the state is published.
type epochState struct {
	allow    atomic.Int64 // tokens released so far: the share, or its paced part
	withheld atomic.Int64 // released tokens taken back by a pause, until it ends
	called   atomic.Bool  // a call arrived in this epoch
	paused   atomic.Bool  // held, for Settle, which takes no lock
	shadow   atomic.Int64 // tokens granted in shadow and kept (Gate)
	accepted atomic.Int64 // messages the downstream accepted in the epoch (Limiter.Accepted)

	epoch    int64
	pool     int64 // P, milli-tokens
	share    int64
	size     int
	rank     int
	eligible bool
	leaseOut bool  // not eligible because the replica's lease ran out
	revoked  bool  // the lease ran out in the epoch: its tokens were taken back
	max      int64 // Config.Max in the epoch
	shadowOn bool  // Config.Shadow in the epoch: a Shadow never makes its caller wait
	switched bool  // the first epoch of a change of the limit
	slice    int   // pacing slice whose allowance is released; l.mu guards it
	closed   bool
	// given is the tokens lent to the store's spare, and received those the
	// spare lent this replica (Config.Lend); l.mu guards them. dry is set
	// when a caller found no token left.
	given, received int64
	dry             atomic.Bool
	// held is set while a throttle signal's pause holds the epoch's tokens
	// back, heldStart when it did so from the epoch's start, heldAny when it
	// did at some time, and cut when the epoch's pool is the first after a
	// cut. l.mu guards them.
	held, heldStart, heldAny, cut bool
	// counters[0] is the common counter, the tokens not in any lane's stripe, which
	// the Limiter's own calls take from; counters[i] is lane slot i's stripe.
	counters []stripe
}

// cacheLine is the span that two counters written by different cores must not
// share: two 64-byte lines, as x86 prefetches lines in adjacent pairs.
const cacheLine = 128

// stripe is a counter of tokens on a cache line of its own, so that lanes on
// different cores do not contend. A lane's stripe holds tokens it took from the
// common counter in advance.
type stripe struct {
	avail atomic.Int64
	_     [cacheLine - 8]byte
}

func newCounters(lanes int) []stripe { return make([]stripe, 1+lanes) }

// laneSlots is the number of stripes per epoch: enough that the lanes of a busy
// process rarely share one.
func laneSlots() int {
	n := 8
	for n < 2*runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	return n
}

// counter returns the counter a lane takes from and deposits to.
func (st *epochState) counter(lane uint32) *atomic.Int64 { return &st.counters[lane].avail }

// common returns the common counter.
func (st *epochState) common() *atomic.Int64 { return &st.counters[0].avail }

// unspent returns the tokens released and not granted, in every counter. It is
// exact when nothing runs concurrently.
func (st *epochState) unspent() int64 {
	n := int64(0)
	for i := range st.counters {
		n += max(st.counters[i].avail.Load(), 0)
	}
	return n
}

// granted returns the tokens granted in the epoch, less deposits.
func (st *epochState) granted() int64 {
	return min(max(st.allow.Load()+st.received-st.given-st.unspent()-st.withheld.Load(), 0), st.share+st.received)
}

// drain takes every token left in every counter, for a pause, and returns
// how many it took.
func (st *epochState) drain() int64 {
	n := int64(0)
	for i := range st.counters {
		n += takeExact(&st.counters[i].avail, math.MaxInt64)
	}
	return n
}

// take takes up to k tokens from c with one add, settling an overdraw.
func take(c *atomic.Int64, k int64) int64 {
	had := c.Add(-k) + k
	g := min(k, max(had, 0))
	if g < k {
		c.Add(k - g)
	}
	return g
}

// takeExact takes up to k tokens from c without ever taking it below zero.
func takeExact(c *atomic.Int64, k int64) int64 {
	for {
		v := c.Load()
		if v <= 0 {
			return 0
		}
		g := min(k, v)
		if c.CompareAndSwap(v, v-g) {
			return g
		}
	}
}

// refillChunk is the fewest batches' worth of tokens a lane takes from the common
// counter at once; with plenty left it takes a fair part of what is left, so that
// lanes seldom touch the common counter.
const refillChunk = 8

// replenish finds up to need more tokens for a caller on lane whose own counter ran
// dry: a lane refills its stripe from the common counter, keeping the surplus for
// its next calls; then any caller takes what other stripes hold.
func (st *epochState) replenish(lane uint32, need int64) int64 {
	got := int64(0)
	if lane != 0 {
		chunk := max(need*refillChunk, st.common().Load()/int64(2*len(st.counters)))
		got = take(st.common(), chunk)
		if got > need {
			st.counter(lane).Add(got - need)
			return need
		}
		if got == need {
			return got
		}
	}
	return got + st.gather(need-got, lane)
}

// noLane makes gather look at every counter.
const noLane = ^uint32(0)

// gather takes up to k tokens from every counter but skip's.
func (st *epochState) gather(k int64, skip uint32) int64 {
	got := int64(0)
	for lane := uint32(0); int(lane) < len(st.counters) && got < k; lane++ {
		if lane != skip {
			got += takeExact(st.counter(lane), k-got)
		}
	}
	return got
}
