package forward

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// A per-key limit (rateLimit.perKey) is the throttle's rule, held in its
// throttle.Hold: which messages of a read go on, which are held until their
// key has tokens again, and which go back to the source when the hold is
// full. The forwarder reads through the hold (readBatch), lets it make room
// before each read (loop.step), and hands back what it still holds when it
// stops (releaseHeld). The reader, and handing messages back to it, stay the
// forwarder's: they go under its ack lock, as its acks and nacks do.

// readCounted reads into buf from the forwarder's reader and counts what it
// read: the hold's reads of new messages.
func (f *Forwarder) readCounted(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n, err := f.d.Reader.Read(ctx, buf)
	if n > 0 {
		f.d.Metrics.Read.Add(float64(n))
	}
	return n, err
}

// nackHeld hands msgs, held messages the hold makes room of, back to the
// reader, to be delivered again no sooner than delay.
func (f *Forwarder) nackHeld(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nackTimeout)
	defer cancel()
	f.ackMu.Lock()
	defer f.ackMu.Unlock()
	return f.nacker.Nack(nctx, msgs, delay)
}

// releaseHeld gives up the messages still held when the forwarder stops:
// they are handed back to a reader that takes them (isb.Nacker), to be
// delivered again at once, and otherwise left unacked.
func (f *Forwarder) releaseHeld(hard context.Context) {
	msgs := f.keys.Release()
	if len(msgs) == 0 {
		return
	}
	if f.nacker == nil {
		f.log.Warn("messages held for their key's limit were not acked; the source delivers them again if it can",
			zap.Int("messages", len(msgs)))
		return
	}
	if err := f.nackHeld(hard, msgs, 0); err != nil {
		f.log.Warn("nack of the messages held for their key's limit failed; they are delivered again after the reader's ack deadline",
			zap.Int("messages", len(msgs)), zap.Error(err))
		return
	}
	f.log.Info("messages held for their key's limit handed back to be delivered again", zap.Int("messages", len(msgs)))
}
