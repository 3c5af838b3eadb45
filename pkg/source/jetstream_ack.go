package source

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Ack acks msgs and waits until the server has confirmed every ack, for
// jsAPITimeout at most when ctx has no earlier deadline. It fails when an ack
// cannot be sent or is not confirmed; acking the same messages again is then
// safe, and until then they are kept in progress.
func (j *JetStream) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	hs, err := j.release(msgs, false)
	if err != nil {
		return j.err("ack", err)
	}
	if len(hs) == 0 {
		return nil
	}
	if err := j.ackConfirmed(ctx, hs); err != nil {
		j.hold(hs)
		return j.err("ack", err)
	}
	return nil
}

// ackConfirmed sends a double ack for each of hs, all with one reply
// subject, and waits for the server's confirmations.
func (j *JetStream) ackConfirmed(ctx context.Context, hs []*jsHeld) error {
	inbox := j.nc.NewInbox()
	sub, err := j.nc.SubscribeSync(inbox)
	if err != nil {
		return natsConnErr(err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return err
	}
	for _, h := range hs {
		if err := j.nc.PublishRequest(h.reply, inbox, jsAck); err != nil {
			return natsConnErr(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, jsAPITimeout)
	defer cancel()
	for confirmed := 0; confirmed < len(hs); confirmed++ {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if !j.nc.IsConnected() {
				err = fmt.Errorf("%w: %w", ErrNATSNotConnected, err)
			}
			return fmt.Errorf("%d of %d acks confirmed: %w", confirmed, len(hs), err)
		}
		if status := msg.Header.Get("Status"); status != "" {
			// 503: no one took the ack; the consumer is gone.
			return fmt.Errorf("an ack was answered %s %s: the consumer may be gone", status, msg.Header.Get("Description"))
		}
	}
	return nil
}

// Nak hands msgs back to be delivered again no sooner than delay from now
// (0: at once). A message already acked or naked is left as it is.
func (j *JetStream) Nak(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	hs, err := j.release(msgs, true)
	if err != nil {
		return j.err("nak", err)
	}
	body := jsNak
	if delay > 0 {
		body = []byte(`-NAK {"delay":` + strconv.FormatInt(int64(delay), 10) + `}`)
	}
	for _, h := range hs {
		if err := j.nc.Publish(h.reply, body); err != nil {
			return j.err("nak", natsConnErr(err))
		}
	}
	if len(hs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, jsAPITimeout)
	defer cancel()
	if err := j.nc.FlushWithContext(ctx); err != nil {
		return j.err("nak", natsConnErr(err))
	}
	return nil
}

// release takes msgs out of the held set and returns their handles. A
// message acked before, by an Ack that failed, is returned again, unless
// onlyHeld: a nak leaves alone what is no longer held (acked, or naked and
// perhaps delivered again already, when a second nak would have the server
// deliver it once more).
func (j *JetStream) release(msgs []isb.ReadMessage, onlyHeld bool) ([]*jsHeld, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	hs := make([]*jsHeld, 0, len(msgs))
	var bad error
	for i := range msgs {
		h, ok := msgs[i].Handle.(*jsHeld)
		if !ok {
			bad = fmt.Errorf("message %q was not read from this source", msgs[i].ID)
			continue
		}
		if _, held := j.held[h]; !held && onlyHeld {
			continue
		}
		delete(j.held, h)
		hs = append(hs, h)
	}
	return hs, bad
}

// hold holds hs again: their acks were not confirmed.
func (j *JetStream) hold(hs []*jsHeld) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	for _, h := range hs {
		j.held[h] = struct{}{}
	}
}

// Pending returns, as Numaflow does, the consumer's messages not yet
// delivered (NumPending) plus those delivered and not yet acked
// (NumAckPending: being processed by a replica, or waiting to be delivered
// again).
func (j *JetStream) Pending(ctx context.Context) (int64, error) {
	if !j.nc.IsConnected() {
		return PendingUnknown, j.err("pending", ErrNATSNotConnected)
	}
	ctx, cancel := context.WithTimeout(ctx, jsAPITimeout)
	defer cancel()
	info, err := j.cons.Info(ctx)
	if err != nil {
		return PendingUnknown, j.err("pending", natsConnErr(err))
	}
	return int64(info.NumPending) + int64(info.NumAckPending), nil
}

// inProgressLoop tells the server, every third of AckWait, that the held
// messages are still in progress, until ctx is done.
func (j *JetStream) inProgressLoop(ctx context.Context) {
	defer j.wg.Done()
	t := time.NewTicker(max(j.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	var replies []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j.mu.Lock()
		replies = replies[:0]
		for h := range j.held {
			replies = append(replies, h.reply)
		}
		j.mu.Unlock()
		failed := 0
		for _, r := range replies {
			if err := j.nc.Publish(r, jsProgress); err != nil {
				failed++
			}
		}
		if failed > 0 {
			j.log.Warn("cannot send in-progress acks; the messages may be delivered again", zap.Int("messages", failed))
		}
	}
}

// Close stops the in-progress acks, hands back every message read and not
// yet acked, so that it is delivered again at once rather than after
// AckWait, and closes the connection: close the source once its messages are
// acked or given up. Reads after Close fail with [ErrNATSClosed]. Close is
// safe to call twice.
func (j *JetStream) Close() error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		j.closed = true
		held := make([]string, 0, len(j.held))
		for h := range j.held {
			held = append(held, h.reply)
		}
		clear(j.held)
		j.mu.Unlock()
		j.stop()
		j.wg.Wait()
		for _, r := range held {
			_ = j.nc.Publish(r, jsNak)
		}
		if len(held) > 0 {
			if err := j.nc.FlushTimeout(time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				j.log.Debug("cannot hand back the messages not acked; they are delivered again after AckWait", zap.Error(err))
			}
		}
		j.nc.Close()
	})
	return nil
}
