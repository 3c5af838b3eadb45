package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Reader reads one buffer through its durable consumer. It implements
// [isb.Reader], [isb.Naker] and [isb.Closer] and is safe for concurrent use.
// Readers of the same buffer, in one process or many, share the consumer:
// each message goes to one of them.
//
// Read asks the server for at most len(buf) messages and never more, so a
// rate limiter's grant bounds what is taken from the buffer. It first takes
// what is there without waiting; when that is nothing it waits up to the read
// timeout (or until ctx is done) for one message, then takes what else is
// there without waiting. At low load a message is returned as soon as it
// arrives; at high load a Read is one round trip. The wait is made of pull
// requests of at most a second: when ctx is done during one, Read returns at
// once, and a message the server still delivers to that request is naked
// (handed back) rather than left until AckWait.
//
// Until a message read is acked or naked, the Reader tells the server every
// third of the consumer's AckWait that it is still in progress, so that a
// slow batch is not delivered again to another reader. A message neither
// acked nor naked when the Reader is closed (or its process dies) is
// delivered again once AckWait has passed.
type Reader struct {
	name        string
	cons        jetstream.Consumer
	nc          *nats.Conn
	conn        *Conn
	readTimeout time.Duration
	ackWait     time.Duration
	log         *zap.Logger

	mu     sync.Mutex
	held   map[jetstream.Msg]struct{} // read, not yet acked or naked
	closed bool

	stop      context.CancelFunc
	wg        sync.WaitGroup // the in-progress loop and late-fetch drains
	closeOnce sync.Once
}

var (
	_ isb.Reader = (*Reader)(nil)
	_ isb.Naker  = (*Reader)(nil)
	_ isb.Closer = (*Reader)(nil)
)

// maxPullWait bounds one pull request of a waiting Read: a Read the caller
// gives up on still holds a pull open on the server for up to this long, and
// Close waits for it.
const maxPullWait = time.Second

// ackBody is what an ack sends to a message's reply subject.
var ackBody = []byte("+ACK")

// Reader returns a reader of the buffer name (created with CreateBuffer)
// whose reads wait at most readTimeout (at least 1 ms) for a message. It
// fails with an error matching [ErrBufferNotFound] when the buffer does not
// exist. Close the Reader to stop its in-progress goroutine.
func (c *Conn) Reader(name string, readTimeout time.Duration) (*Reader, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	cons, err := c.js.Consumer(ctx, name, name)
	if err != nil {
		return nil, bufferErr("read", name, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	ictx, stop := context.WithCancel(context.Background())
	r := &Reader{
		name:        name,
		cons:        cons,
		nc:          c.nc,
		conn:        c,
		readTimeout: max(readTimeout, time.Millisecond),
		ackWait:     ackWait,
		log:         c.log.With(zap.String("buffer", name)),
		held:        map[jetstream.Msg]struct{}{},
		stop:        stop,
	}
	r.wg.Add(1)
	go r.inProgressLoop(ictx)
	return r, nil
}

// Read reads at most len(buf) messages into buf; see [Reader]. Each message's
// Handle is its jetstream.Msg and its Value aliases the message's data. A
// message whose body cannot be decoded is terminated (the server drops it)
// and reported in an error matching [ErrDecode], next to the messages read.
func (r *Reader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if r.isClosed() {
		return 0, fmt.Errorf("jetstream: read buffer %s: %w", r.name, ErrClosed)
	}
	if len(buf) == 0 {
		return 0, nil
	}
	batch, err := r.cons.FetchNoWait(len(buf))
	if err != nil {
		return 0, r.readErr(err)
	}
	n, err := r.take(batch, buf)
	if n > 0 || err != nil {
		return n, err
	}

	// Nothing there: wait for one message, for the read timeout at most,
	// in pulls of at most maxPullWait.
	deadline := time.Now().Add(r.readTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var first jetstream.Msg
	for first == nil {
		wait := min(time.Until(deadline), maxPullWait)
		if wait <= 0 || ctx.Err() != nil {
			return 0, nil
		}
		if batch, err = r.cons.Fetch(1, jetstream.FetchMaxWait(wait)); err != nil {
			return 0, r.readErr(err)
		}
		select {
		case first = <-batch.Messages():
		case <-ctx.Done():
			r.drainLate(batch)
			return 0, nil
		}
		if first == nil {
			if err := batch.Error(); err != nil {
				return 0, r.readErr(err)
			}
		}
	}
	var decodeErr error
	if n, decodeErr = r.put(first, buf, 0); len(buf) == n {
		return n, decodeErr
	}
	if batch, err = r.cons.FetchNoWait(len(buf) - n); err != nil {
		return n, errors.Join(decodeErr, r.readErr(err))
	}
	m, err := r.take(batch, buf[n:])
	return n + m, errors.Join(decodeErr, err)
}

// take moves the messages of batch into buf.
func (r *Reader) take(batch jetstream.MessageBatch, buf []isb.ReadMessage) (int, error) {
	n := 0
	var errs []error
	for msg := range batch.Messages() {
		var err error
		if n, err = r.put(msg, buf, n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := batch.Error(); err != nil && n == 0 {
		errs = append(errs, r.readErr(err))
	}
	return n, errors.Join(errs...)
}

// put decodes msg into buf[n] and holds it, returning the new count; a
// message that cannot be decoded is terminated instead.
func (r *Reader) put(msg jetstream.Msg, buf []isb.ReadMessage, n int) (int, error) {
	if err := decodeMessage(msg.Data(), &buf[n].Message); err != nil {
		seq := uint64(0)
		if md, mdErr := msg.Metadata(); mdErr == nil {
			seq = md.Sequence.Stream
		}
		err = fmt.Errorf("%w: buffer %s, stream sequence %d: %w", ErrDecode, r.name, seq, err)
		r.log.Error("dropping a message that cannot be decoded", zap.Error(err))
		if termErr := msg.Term(); termErr != nil {
			r.log.Warn("cannot terminate the undecodable message", zap.Uint64("seq", seq), zap.Error(termErr))
		}
		buf[n] = isb.ReadMessage{}
		return n, err
	}
	buf[n].Handle = msg
	r.mu.Lock()
	r.held[msg] = struct{}{}
	r.mu.Unlock()
	return n + 1, nil
}

// drainLate naks, in the background, messages that a fetch the caller gave
// up on still delivers, so that they are read again without waiting AckWait.
func (r *Reader) drainLate(batch jetstream.MessageBatch) {
	nak := func() {
		for msg := range batch.Messages() {
			_ = msg.Nak()
		}
	}
	r.mu.Lock()
	if r.closed { // Close waits for r.wg: add to it no more
		r.mu.Unlock()
		nak() // ends with the fetch, within maxPullWait
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		nak()
	}()
}

func (r *Reader) readErr(err error) error {
	return bufferErr("read", r.name, err)
}

// Ack acks msgs and waits until the server has received the acks, so that
// nothing acked before a disconnect is delivered again. It fails when an ack
// cannot be sent or the server does not confirm receipt; acking the same
// messages again is then safe.
func (r *Reader) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	for i := range msgs {
		msg, ok := msgs[i].Handle.(jetstream.Msg)
		if !ok {
			return fmt.Errorf("jetstream: ack buffer %s: message %q was not read from this package", r.name, msgs[i].ID)
		}
		err := msg.Ack()
		if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			// Acked before, by an Ack that failed later: send it again.
			err = r.nc.Publish(msg.Reply(), ackBody)
		}
		if err != nil {
			return fmt.Errorf("jetstream: ack buffer %s: %w", r.name, connErr(err))
		}
	}
	if err := r.conn.flush(ctx); err != nil {
		return fmt.Errorf("jetstream: ack buffer %s: waiting for the server: %w", r.name, err)
	}
	r.release(msgs)
	return nil
}

// Nak hands msgs back to be delivered again after delay (0: at once). A
// message already acked or naked is left as it is.
func (r *Reader) Nak(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	defer r.release(msgs)
	for i := range msgs {
		msg, ok := msgs[i].Handle.(jetstream.Msg)
		if !ok {
			return fmt.Errorf("jetstream: nak buffer %s: message %q was not read from this package", r.name, msgs[i].ID)
		}
		var err error
		if delay > 0 {
			err = msg.NakWithDelay(delay)
		} else {
			err = msg.Nak()
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return fmt.Errorf("jetstream: nak buffer %s: %w", r.name, connErr(err))
		}
	}
	return nil
}

// release stops the in-progress acks of msgs.
func (r *Reader) release(msgs []isb.ReadMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range msgs {
		if msg, ok := msgs[i].Handle.(jetstream.Msg); ok {
			delete(r.held, msg)
		}
	}
}

// inProgressLoop sends an in-progress ack for every held message every third
// of AckWait until ctx is done.
func (r *Reader) inProgressLoop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(max(r.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	var batch []jetstream.Msg
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		batch = batch[:0]
		for msg := range r.held {
			batch = append(batch, msg)
		}
		r.mu.Unlock()
		failed := 0
		for _, msg := range batch {
			if err := msg.InProgress(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
				failed++
			}
		}
		if failed > 0 {
			r.log.Warn("cannot send in-progress acks; the messages may be delivered again", zap.Int("messages", failed))
		}
	}
}

func (r *Reader) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close stops the in-progress acks and waits for the Reader's goroutines.
// Messages read and not acked are delivered again after AckWait. Reads after
// Close fail with [ErrClosed]; Ack and Nak still work. Close is safe to call
// twice.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.stop()
		r.wg.Wait()
	})
	return nil
}
