package reduce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Limiter is how a Loop takes tokens for its reads: throttle.Noop for no
// limit, or a rate limiter's gate.
type Limiter interface {
	Acquire(ctx context.Context, n int) (ratelimit.Grant, error)
	Settle(g ratelimit.Grant, used int) ratelimit.Grant
}

// Loop is one reader of a reduce vertex: it reads a partition of the
// vertex's input, takes each batch into its Processor, acks it, and writes
// the results of the windows the watermark closes.
type Loop struct {
	// Reader is the partition read; Writer takes the results.
	Reader isb.Reader
	Writer isb.Writer
	// Processor keeps the windows or key sets; its log, if any, recovered.
	Processor Stage
	// Watermark is the vertex's watermark, false while there is none.
	Watermark func() (time.Time, bool)
	// Limiter takes a token for each message read.
	Limiter Limiter
	// BatchSize is the most messages read at once (at least 1).
	BatchSize int
	// RetryInterval is the wait before a failed write of results is tried
	// again (default 100 ms).
	RetryInterval time.Duration
	// Clock times the retries (default the wall clock); Log is for errors
	// (default none); Metrics, when set, count what the loop does; LateLog,
	// when set, logs the messages dropped as late.
	Clock   clock.Clock
	Log     *zap.Logger
	Metrics *Metrics
	LateLog *LateLog

	wm time.Time // the last watermark given to the Processor
}

// lateTeller is a Stage that tells what its last Add dropped as late (a
// Processor); of another, the Loop reckons it from the watermark it gave
// it last.
type lateTeller interface {
	Dropped() Late
}

// Run reads until ctx ends, and returns nil then; it returns an error when
// the log fails, a read or an ack fails for good, or the reducer fails.
// Results not yet written when ctx ends are written after a restart, as
// the windows come back from the log.
func (l *Loop) Run(ctx context.Context) error {
	switch {
	case l.Reader == nil || l.Writer == nil || l.Processor == nil || l.Watermark == nil || l.Limiter == nil:
		return errors.New("reduce: Loop needs a Reader, Writer, Processor, Watermark and Limiter")
	case l.BatchSize < 1:
		return fmt.Errorf("reduce: Loop.BatchSize (%d) must be at least 1", l.BatchSize)
	}
	if l.Clock == nil {
		l.Clock = clock.Real()
	}
	if l.Log == nil {
		l.Log = zap.NewNop()
	}
	if l.RetryInterval <= 0 {
		l.RetryInterval = 100 * time.Millisecond
	}
	buf := make([]isb.ReadMessage, l.BatchSize)
	msgs := make([]isb.Message, 0, l.BatchSize)
	for ctx.Err() == nil {
		n, err := l.read(ctx, buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if n > 0 {
			msgs = msgs[:0]
			for i := range buf[:n] {
				msgs = append(msgs, buf[i].Message)
			}
			late, err := l.Processor.Add(ctx, msgs)
			if err != nil {
				return err
			}
			if late > 0 && l.LateLog != nil {
				l.LateLog.Dropped(l.dropped(late, msgs))
			}
			if m := l.Metrics; m != nil {
				m.Read.Add(float64(n - late))
				m.Late.Add(float64(late))
			}
			if err := l.Reader.Ack(ctx, buf[:n]); err != nil && ctx.Err() == nil {
				return fmt.Errorf("reduce: ack: %w", err)
			}
		}
		if err := l.close(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// read takes tokens for a batch, reads, and settles what it did not use.
func (l *Loop) read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	g, err := l.Limiter.Acquire(ctx, len(buf))
	if err != nil {
		return 0, err
	}
	n, err := l.Reader.Read(ctx, buf[:max(g.Tokens, 0)])
	l.Limiter.Settle(g, n)
	if err != nil {
		return 0, fmt.Errorf("reduce: read: %w", err)
	}
	return n, nil
}

// close advances the watermark, writes the results of the windows it
// closes until every one is written, and commits them.
func (l *Loop) close(ctx context.Context) error {
	wm, ok := l.Watermark()
	if !ok {
		return nil
	}
	l.wm = wm
	open := l.Processor.Open()
	res, err := l.Processor.Advance(ctx, wm)
	if err != nil {
		return err
	}
	if m := l.Metrics; m != nil {
		m.Closed.Add(float64(open - l.Processor.Open()))
		m.Results.Add(float64(len(res)))
	}
	if len(res) == 0 {
		return l.Processor.Commit() // windows that made no results
	}
	errs := make([]error, len(res))
	for {
		if err := l.Writer.Write(ctx, res, errs); err == nil {
			n := 0
			for i, e := range errs {
				if e != nil && !errors.Is(e, isb.ErrOnSuccess) { // ON_SUCCESS: written
					res[n] = res[i]
					n++
				}
			}
			if res = res[:n]; n == 0 {
				break
			}
			errs = errs[:n]
			l.Log.Warn("results not written; trying again", zap.Int("count", n), zap.Error(firstError(errs)))
		} else {
			l.Log.Warn("writing results failed; trying again", zap.Error(err))
		}
		if !clock.Sleep(ctx, l.Clock, l.RetryInterval) {
			return ctx.Err()
		}
	}
	return l.Processor.Commit()
}

// dropped is what the Processor's last Add dropped as late, late messages
// of msgs.
func (l *Loop) dropped(late int, msgs []isb.Message) Late {
	if t, ok := l.Processor.(lateTeller); ok {
		return t.Dropped()
	}
	return lateBehind(late, msgs, l.wm)
}

func firstError(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
