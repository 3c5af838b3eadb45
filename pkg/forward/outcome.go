package forward

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// What a sink answers for each message decides what the forwarder does with
// it: written (nil), to the on-success sink (isb.ErrOnSuccess), to the
// fallback sink (isb.ErrFallback), handed back to
// the source (isb.ErrNack), retried after the wait the sink asked for without
// using a retry step (isb.ErrThrottled), to the fallback sink or dropped at
// once, else retried (isb.ErrRejected), or retried as a failure (any other
// error, isb.ErrBufferFull among them).

// outcome is what one write of a batch came to, beside the messages to retry.
type outcome struct {
	written int
	// errors counts the messages that failed, rejected ones included; failed
	// those of them retried that were not rejected, and rejected those that
	// were.
	errors, failed, rejected int
	// full is set when a message failed because the downstream is full.
	full bool
	// throttled counts the messages refused with a throttle signal, and
	// retryAfter is the longest wait one of them asked for.
	throttled  int
	retryAfter time.Duration
	// signals are the kinds of throttle signal among them, each with its
	// longest wait.
	signals []signal
	// firstErr is the error of the first failed message that is neither
	// throttled nor rejected, and firstRejected of the first rejected one.
	firstErr, firstRejected error
}

// failedOne sorts out a message the writer of stage did not write, counting it
// in o, and reports whether it is to be tried again.
func (f *worker) failedOne(stage string, m *isb.Message, err error, o *outcome) bool {
	switch {
	case errors.Is(err, isb.ErrFallback) && stage == StageWrite && f.d.Fallback != nil:
		f.fallback = append(f.fallback, *m)
		return false
	case errors.Is(err, isb.ErrNack):
		var opts isb.NackOptions
		if ne := (*isb.NackError)(nil); errors.As(err, &ne) {
			opts = ne.Options
		}
		f.nack(m.Origin, &opts)
		return false
	case errors.Is(err, isb.ErrFallback):
		// As Numaflow's runtime, a fallback sink that answers fallback is an
		// error: the message is retried, never lost.
		err = fmt.Errorf("%w, which the %s stage may not answer: only the sink of a vertex with a fallback sink (spec.sink.fallback) may", err, stage)
	case errors.Is(err, isb.ErrThrottled):
		o.throttled++
		if te := (*isb.ThrottledError)(nil); errors.As(err, &te) {
			o.retryAfter = max(o.retryAfter, te.RetryAfter)
			o.signals = noteSignal(o.signals, te.Signal, te.RetryAfter)
		}
		return true
	}
	o.errors++
	if errors.Is(err, isb.ErrRejected) {
		return f.rejected(stage, m, err, o)
	}
	o.full = o.full || errors.Is(err, isb.ErrBufferFull)
	o.failed++
	if o.firstErr == nil {
		o.firstErr = err
	}
	return true
}

// rejected sorts out a message the writer of stage rejected: to the fallback
// sink when there is one, dropped when OnFailure is Drop, retried otherwise. It
// reports whether the message is to be tried again.
func (f *worker) rejected(stage string, m *isb.Message, err error, o *outcome) bool {
	switch {
	case stage == StageWrite && f.d.Fallback != nil:
		f.fallback = append(f.fallback, *m)
		return false
	case f.opts.Retry.OnFailure == Drop:
		f.d.Metrics.Dropped.Inc()
		if f.rejectDrops == 0 {
			f.rejectErr = err
		}
		f.rejectDrops++
		return false
	}
	o.rejected++
	if o.firstRejected == nil {
		o.firstRejected = err
	}
	return true
}

// succeeded sorts out a message the writer of stage wrote and answered ON_SUCCESS
// with err: the sink's message goes to f.onSuccess when stage is the sink's
// and there is an on-success sink. It reports whether the message counts as
// written by stage instead: the fallback or on-success sink answered it, or
// there is no on-success sink (which is logged once).
func (f *worker) succeeded(stage string, m *isb.Message, err error) bool {
	if stage != StageWrite {
		return true
	}
	if f.d.OnSuccess == nil {
		if f.onSuccessLog.CompareAndSwap(false, true) {
			f.log.Warn("the sink answers ON_SUCCESS and the vertex has no on-success sink (sink.onSuccess); counting the messages as written")
		}
		return true
	}
	f.onSuccess = append(f.onSuccess, isb.OnSuccessMessage(*m, err))
	return false
}

// count adds o to the metrics of stage and logs the failures to retry.
func (f *Forwarder) count(stage string, o *outcome) {
	switch stage {
	case StageWrite:
		f.d.Metrics.Written.Add(float64(o.written))
	case StageOnSuccess:
		f.d.Metrics.OnSuccess.Add(float64(o.written))
	default:
		f.d.Metrics.Fallback.Add(float64(o.written))
	}
	if o.errors > 0 {
		f.d.Metrics.Errors.WithLabelValues(stage).Add(float64(o.errors))
	}
	if o.throttled > 0 {
		f.d.Metrics.ThrottleSignals.Add(float64(o.throttled))
	}
	if stage == StageWrite && o.written > 0 && f.th.Accepted != nil {
		f.th.Accepted(o.written)
	}
	f.signal(o.signals)
	if o.firstErr != nil && !o.full {
		f.log.Warn("write failed; retrying", zap.String("stage", stage), zap.Int("messages", o.failed), zap.Error(o.firstErr))
	}
	if o.rejected > 0 {
		f.log.Warn("the sink rejected messages; retrying them, which will not help unless it changes its mind "+
			"(with a fallback sink, or onFailure: drop, they would not be retried)",
			zap.String("stage", stage), zap.Int("messages", o.rejected), zap.Error(o.firstRejected))
	}
}

// giveUp takes out of pending, and of f.tries along with it, the messages that
// failed as many times as the retry policy's Steps when OnFailure says what to
// do with them then: add them to f.fallback, or drop them. It returns the
// messages left to retry.
func (f *worker) giveUp(pending []isb.Message) []isb.Message {
	p := f.opts.Retry
	if p.Steps <= 0 || p.OnFailure == Retry {
		return pending
	}
	kept, tries, dropped := pending[:0], f.tries[:0], 0
	for i, m := range pending {
		switch {
		case f.tries[i] < p.Steps:
			kept, tries = append(kept, m), append(tries, f.tries[i])
		case p.OnFailure == Drop || f.d.Fallback == nil:
			dropped++
		default:
			f.fallback = append(f.fallback, m)
		}
	}
	if dropped > 0 {
		f.log.Warn("dropping messages the sink keeps failing", zap.Int("messages", dropped))
		f.d.Metrics.Dropped.Add(float64(dropped))
	}
	clear(pending[len(kept):]) // let go of the payloads
	f.tries = tries
	return kept
}

// pause waits before the retry of the retry messages that follows attempt:
// the backoff, or as long as the longest wait the sink asked for when it
// throttled messages, then until the limiter's next epoch begins. While it waits for a throttled sink, the tracker holds
// downstream_throttled, and after the wait it takes tokens anew for the
// messages to send again (see throttle.Tokens.Retake). It reports whether it waited the whole
// time, which it does not when hard ends.
func (f *worker) pause(hard context.Context, o outcome, attempt, retry int) bool {
	d := f.backoff(attempt)
	if o.throttled == 0 {
		return f.sleep(hard, d)
	}
	// It wakes with at least freshMargin of an epoch left, and takes tokens
	// for the messages it sends again from that epoch or a later one: sent
	// at the end of an epoch on tokens a wait left unused, they would reach
	// the sink in the next second, on top of its grant.
	d, from := f.th.Limiter.FreshAfter(max(d, o.retryAfter), freshMargin)
	f.log.Debug("the sink is throttled; waiting before the retry",
		zap.Int("messages", o.throttled), zap.Duration("wait", d))
	f.d.Tracker.Begin(ratelimit.ReasonDownstreamThrottled)
	waited := f.sleep(hard, d)
	f.d.Tracker.End(ratelimit.ReasonDownstreamThrottled)
	if !waited {
		return false
	}
	return f.tok.Retake(hard, retry, from) // the retry is written on these
}

// freshMargin is the least of an epoch left when a forwarder sends again
// what a throttled sink refused: longer than a batch takes to send.
const freshMargin = 200 * time.Millisecond

// logRejectedDrops logs, once per batch, the messages the sink rejected that
// OnFailure dropped, and forgets them.
func (f *worker) logRejectedDrops() {
	if f.rejectDrops == 0 {
		return
	}
	f.log.Warn("dropping messages the sink rejected (onFailure: drop)",
		zap.Int("messages", f.rejectDrops), zap.Error(f.rejectErr))
	f.rejectDrops, f.rejectErr = 0, nil
}

// signal is a kind of throttle signal and the longest wait asked with it.
type signal struct {
	kind       isb.SignalKind
	retryAfter time.Duration
}

// noteSignal adds a signal of kind with wait d to signals, one per kind.
func noteSignal(signals []signal, kind isb.SignalKind, d time.Duration) []signal {
	for i := range signals {
		if signals[i].kind == kind {
			signals[i].retryAfter = max(signals[i].retryAfter, d)
			return signals
		}
	}
	return append(signals, signal{kind, d})
}

// signal hands the throttle signals to the throttle's Signal.
func (f *Forwarder) signal(signals []signal) {
	if f.th.Signal == nil {
		return
	}
	for _, s := range signals {
		if s.kind != isb.SignalUnknown {
			f.th.Signal(s.kind, s.retryAfter)
		}
	}
}

// zeroed returns s resized to n elements, all 0.
func zeroed(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}
