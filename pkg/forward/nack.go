package forward

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// A message a function or the sink nacks (rejects) is not written: the
// message of the batch it came from is handed back to the reader, to be read
// again as the nack's options say, and the rest of the batch is acked. A
// reader that cannot take messages back (a generator, the http source) has
// them delivered again by the forwarder itself, after the nack's delay; so
// has every nacked message of an ordered forwarder (Options.Ordered), so
// that no later message of its partition is read before it is done.

// takeNacks marks the origins of the nacked messages in msgs and returns msgs
// without them.
func (f *worker) takeNacks(msgs []isb.Message) []isb.Message {
	first := slices.IndexFunc(msgs, func(m isb.Message) bool { return m.Nack != nil })
	if first < 0 {
		return msgs
	}
	kept := msgs[:first]
	limited, wait := false, time.Duration(0)
	for i := first; i < len(msgs); i++ {
		if n := msgs[i].Nack; n != nil {
			if n.RateLimited {
				limited, wait = true, max(wait, n.Delay)
			}
			f.nack(msgs[i].Origin, n)
			continue
		}
		kept = append(kept, msgs[i])
	}
	clear(msgs[len(kept):]) // let go of the payloads
	if limited {
		f.signal([]signal{{isb.SignalMapRateLimited, wait}})
	}
	return kept
}

// nack marks batch[origin] nacked with opts; the first nack of a message wins.
func (f *worker) nack(origin int, opts *isb.NackOptions) {
	if origin < 0 || origin >= len(f.nacks) || f.nacks[origin] != nil {
		return
	}
	f.nacks[origin] = opts
	f.nacked++
}

// settle acks the messages of batch that were delivered and hands back those
// that were nacked: to the reader when it takes messages back, else it
// delivers them again itself until none is nacked.
func (f *worker) settle(hard context.Context, batch []isb.ReadMessage) error {
	done := make([]isb.ReadMessage, 0, len(batch)-f.nacked)
	nacked := make([]isb.ReadMessage, 0, f.nacked)
	opts := make([]*isb.NackOptions, 0, f.nacked)
	for i := range batch {
		if f.nacks[i] == nil {
			done = append(done, batch[i])
		} else {
			nacked, opts = append(nacked, batch[i]), append(opts, f.nacks[i])
		}
	}
	f.d.Metrics.Nacked.Add(float64(len(nacked)))
	f.logNack(opts[0])
	if f.opts.Ordered || (f.optsNacker == nil && f.nacker == nil) {
		return f.redeliver(hard, batch, nacked, opts)
	}
	if len(done) > 0 {
		if err := f.ack(hard, done); err != nil {
			return err
		}
	}
	f.handBack(hard, nacked, opts)
	return nil
}

// handBack hands msgs back to the reader, each with its nack options, in runs
// of equal options.
func (f *Forwarder) handBack(hard context.Context, msgs []isb.ReadMessage, opts []*isb.NackOptions) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(hard), nackTimeout)
	defer cancel()
	defer func(start time.Time) { f.d.Metrics.NackTime.Observe(time.Since(start).Seconds()) }(time.Now())
	for start := 0; start < len(msgs); {
		end := start + 1
		for end < len(msgs) && sameNack(opts[start], opts[end]) {
			end++
		}
		var err error
		f.ackMu.Lock()
		if f.optsNacker != nil {
			err = f.optsNacker.NackOptions(ctx, msgs[start:end], *opts[start])
		} else {
			err = f.nacker.Nack(ctx, msgs[start:end], opts[start].Delay)
		}
		f.ackMu.Unlock()
		if err != nil {
			f.d.Metrics.Errors.WithLabelValues(StageNack).Inc()
			f.log.Warn("nack failed; the messages are delivered again after the reader's ack deadline",
				zap.Int("messages", end-start), zap.Error(err))
		}
		start = end
	}
}

func sameNack(a, b *isb.NackOptions) bool {
	return a.Reason == b.Reason && a.Delay == b.Delay && a.MaxDeliveries == b.MaxDeliveries && maps.Equal(a.Values, b.Values)
}

// redeliver delivers the nacked messages of batch again, after their delay,
// until none is nacked, then acks the whole batch. A message nacked
// MaxDeliveries times is dropped.
func (f *worker) redeliver(hard context.Context, batch, nacked []isb.ReadMessage, opts []*isb.NackOptions) error {
	for delivery := 1; len(nacked) > 0; delivery++ {
		wait := f.backoff(delivery - 1)
		keep := nacked[:0]
		for i := range nacked {
			if o := opts[i]; o.MaxDeliveries > 0 && uint32(delivery) >= o.MaxDeliveries {
				f.log.Warn("dropping a message nacked as many times as its nack allows",
					zap.String("id", nacked[i].ID), zap.Uint32("maxDeliveries", o.MaxDeliveries))
				f.d.Metrics.Dropped.Inc()
				continue
			}
			wait = max(wait, opts[i].Delay)
			keep = append(keep, nacked[i])
		}
		if nacked = keep; len(nacked) == 0 {
			break
		}
		if !f.sleep(hard, wait) {
			f.abandon(hard, StageNack, batch, hard.Err())
			return nil
		}
		// Delivered again, each message takes a token again, as one read again
		// from a source that takes messages back does.
		if !f.tok.RenewAll(hard, len(nacked)) {
			f.abandon(hard, StageNack, batch, hard.Err())
			return nil
		}
		if _, err := f.deliver(hard, nacked); err != nil {
			return nil // abandoned
		}
		keep, opts = nacked[:0], opts[:0]
		for i := range nacked {
			if f.nacks[i] != nil {
				keep, opts = append(keep, nacked[i]), append(opts, f.nacks[i])
			}
		}
		nacked = keep
		f.d.Metrics.Nacked.Add(float64(len(nacked)))
	}
	return f.ack(hard, batch)
}

// logNack logs the first nack of the forwarder's life, so that a function or
// sink that nacks is seen without a line per message.
func (f *Forwarder) logNack(opts *isb.NackOptions) {
	if f.nackLog.Swap(true) {
		return
	}
	f.log.Info("a function or the sink nacked a message; it is handed back to be delivered again (sluice_forward_nack_total counts them)",
		zap.String("reason", opts.Reason), zap.Duration("delay", opts.Delay))
}
