package forward

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// DefaultMaxIdlePause is the longest pause between the reads of a dry reader
// when Options.MaxIdlePause is not set.
const DefaultMaxIdlePause = 100 * time.Millisecond

// firstIdlePause is the pause after the first empty read of a run; it doubles
// with each further one, up to Options.MaxIdlePause.
const firstIdlePause = time.Millisecond

// idle paces the reads of a dry reader: one whose reads return no message and
// no error. Without it a reader that answers an empty read at once (many
// user-defined sources do, whatever the read's timeout) is read in a busy
// loop, and each of those reads takes and gives back a batch of tokens.
//
// After an empty read that started at s, the next read starts no sooner than
// s plus the pause: 1ms after the first empty read of a run, doubling with
// each further one up to max. A reader that itself waited that long, as the
// ISB buffers and the built-in sources do for their read timeout, is read
// again at once. A read that returns messages ends the run: the reads of a
// source with data are never delayed.
type idle struct {
	clk   clock.Clock
	max   time.Duration
	pause time.Duration // of the last empty read; 0 after a read with messages
	until time.Time     // no read before this; zero when there is no pause to wait
}

func newIdle(clk clock.Clock, max time.Duration) idle {
	return idle{clk: clk, max: max}
}

// now is when a read starts.
func (i *idle) now() time.Time { return i.clk.Now() }

// read notes a read that started at start and returned n messages.
func (i *idle) read(start time.Time, n int) {
	if n > 0 {
		i.pause, i.until = 0, time.Time{}
		return
	}
	i.pause = min(max(2*i.pause, firstIdlePause), i.max)
	i.until = start.Add(i.pause)
}

// wait waits until the pause after the last empty read is over, or until ctx
// is done.
func (i *idle) wait(ctx context.Context) {
	until := i.until
	i.until = time.Time{}
	if until.IsZero() || ctx.Err() != nil {
		return
	}
	clock.SleepUntil(ctx, i.clk, until)
}
