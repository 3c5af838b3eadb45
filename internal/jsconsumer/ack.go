package jsconsumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// confirmTimeout bounds the wait for the server to receive, or to confirm,
// acks and nacks when the caller's context has no earlier deadline.
const confirmTimeout = 5 * time.Second

// Ack acks msgs and waits until the server has received the acks (with
// ConfirmAcks: until it has confirmed each one), so that nothing acked
// before a disconnect is delivered again. It fails when an ack cannot be
// sent or is not confirmed; the messages are then kept in progress, and
// acking them again is safe. A frame is acked once all of its messages are
// (or nacked, when one of them was). A message not read by this Consumer is
// reported in the error; the others are acked.
func (c *Consumer) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	done, bad := c.resolve(msgs, false, 0)
	if len(done) == 0 {
		return bad
	}
	var err error
	if c.confirmAcks {
		err = c.sendConfirmed(ctx, done)
	} else {
		err = c.send(ctx, done)
	}
	if err != nil {
		c.unresolve(done)
		return err
	}
	return bad
}

// Nack hands msgs back to be delivered again no sooner than delay from now
// (0: at once), and waits until the server has received the NAKs. A message
// already acked or nacked is left as it is. A frame is delivered again whole,
// once all of its messages are acked or nacked: its acked messages too.
func (c *Consumer) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	done, bad := c.resolve(msgs, true, delay)
	if len(done) == 0 {
		return bad
	}
	if err := c.send(ctx, done); err != nil {
		return err
	}
	return bad
}

// NackMax is Nack, but for the messages delivered maxDeliveries times already
// (when it is more than 0), which it terminates: the server drops them and
// delivers them no more. A frame one of whose messages is terminated is
// terminated whole.
func (c *Consumer) NackMax(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration, maxDeliveries uint32) error {
	done, bad := c.resolveMax(msgs, true, delay, maxDeliveries)
	if len(done) == 0 {
		return bad
	}
	if err := c.send(ctx, done); err != nil {
		return err
	}
	return bad
}

// send sends what ends each of hs and waits until the server has received
// them.
func (c *Consumer) send(ctx context.Context, hs []*heldMsg) error {
	for _, h := range hs {
		if err := c.nc.Publish(h.reply, h.body()); err != nil {
			return ConnErr(err)
		}
	}
	if !c.nc.IsConnected() && !c.nc.IsClosed() {
		return fmt.Errorf("%w: the connection dropped before the server answered", ErrNotConnected)
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	err := c.nc.FlushWithContext(ctx)
	if err != nil && !c.nc.IsClosed() && errors.Is(err, nats.ErrConnectionClosed) {
		// nats.go fails a flush cut short by a disconnect this way.
		err = fmt.Errorf("%w: the connection dropped before the server answered", ErrNotConnected)
	}
	return err
}

// sendConfirmed sends what ends each of hs as a request, all with one reply
// subject, and waits for the server to confirm every one.
func (c *Consumer) sendConfirmed(ctx context.Context, hs []*heldMsg) error {
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return ConnErr(err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return err
	}
	for _, h := range hs {
		if err := c.nc.PublishRequest(h.reply, inbox, h.body()); err != nil {
			return ConnErr(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	for confirmed := 0; confirmed < len(hs); confirmed++ {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if !c.nc.IsConnected() {
				err = fmt.Errorf("%w: %w", ErrNotConnected, err)
			}
			return fmt.Errorf("%d of %d acks confirmed: %w", confirmed, len(hs), err)
		}
		if status := msg.Header.Get("Status"); status != "" {
			// 503: no one took the ack; the consumer is gone.
			return fmt.Errorf("%w: an ack was answered %s %s", ErrGone, status, msg.Header.Get("Description"))
		}
	}
	return nil
}
