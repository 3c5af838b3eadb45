package udfserver

import (
	"sync/atomic"
	"time"
)

// inlineBelow is the average handler time under which the receiving
// goroutine runs handlers itself: handing a request over to another
// goroutine and waking it costs about a microsecond, more than a quick
// handler takes.
const inlineBelow = 20 * time.Microsecond

// takeoverTick is how often the watchdog looks at the handler the
// receiving goroutine runs: one still running a tick later, so for a tick
// or two, has the receiving handed on to a new goroutine.
const takeoverTick = time.Millisecond

// parkAfter is how many ticks without a handler run by the receiving
// goroutine the watchdog waits before it stops ticking, until the next one.
const parkAfter = 8

// inline is what the receiving goroutine, the handlers and the watchdog of
// ServeConcurrent share about handlers run by the receiving goroutine.
type inline struct {
	avg     atomic.Int64  // handler time, nanoseconds, a moving average
	running atomic.Bool   // the receiving goroutine runs a handler
	runs    atomic.Uint64 // handlers the receiving goroutines began
	parked  atomic.Bool   // the watchdog waits on wake
	wake    chan struct{} // wakes the parked watchdog; room for one
	done    chan struct{} // closed by stop
	stopped chan struct{} // closed when watch returns
}

func newInline() inline {
	return inline{wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
}

// quick reports whether handlers are quick enough to run inline.
func (in *inline) quick() bool { return in.avg.Load() < int64(inlineBelow) }

// observe adds a handler's time d to the average (weight 1/8). A time
// over 4×inlineBelow counts as 4×inlineBelow: one handler that was
// descheduled for a while does not stop the inlining, several slow ones in
// a row do.
func (in *inline) observe(d time.Duration) {
	d = min(d, 4*inlineBelow)
	avg := in.avg.Load()
	in.avg.Store(avg + (int64(d)-avg)/8)
}

// begin marks the start of a handler run by the receiving goroutine.
func (in *inline) begin() {
	in.running.Store(true)
	in.runs.Add(1)
	if in.parked.Load() {
		select {
		case in.wake <- struct{}{}:
		default:
		}
	}
}

// end marks its end. It reports false when the watchdog has handed the
// receiving on meanwhile: the goroutine is no longer the receiving one.
func (in *inline) end() bool { return in.running.CompareAndSwap(true, false) }

// takeOver ends, for the watchdog, the handler the receiving goroutine
// runs, so that end reports false. It reports false when the handler has
// ended already.
func (in *inline) takeOver() bool { return in.running.CompareAndSwap(true, false) }

// watch calls takeOver when the receiving goroutine has run one handler for
// a tick or more, until stop.
func (in *inline) watch(takeOver func() bool) {
	defer close(in.stopped)
	t := time.NewTicker(takeoverTick)
	defer t.Stop()
	last, idle := in.runs.Load(), 0
	for {
		select {
		case <-in.done:
			return
		case <-t.C:
		}
		runs := in.runs.Load()
		switch {
		case runs != last:
			idle = 0
		case in.running.Load(): // the handler running a tick ago
			takeOver()
			idle = 0
		default:
			idle++
		}
		last = runs
		if idle < parkAfter {
			continue
		}
		// No handler run inline for a while: wait for the next rather than
		// tick. begin wakes the watchdog once it sees parked, or the
		// watchdog sees the handler running (sync/atomic is sequentially
		// consistent).
		in.parked.Store(true)
		if !in.running.Load() {
			t.Stop()
			select {
			case <-in.wake:
			case <-in.done:
				return
			}
			t.Reset(takeoverTick)
		}
		in.parked.Store(false)
		last, idle = in.runs.Load(), 0
	}
}

// stop stops watch and waits for it to return.
func (in *inline) stop() {
	close(in.done)
	<-in.stopped
}
