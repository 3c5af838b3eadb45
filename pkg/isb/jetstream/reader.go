package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Reader reads one buffer through its durable consumer, with a
// [jsconsumer.Consumer] that fetches ahead. It implements [isb.Reader],
// [isb.Nacker], [isb.OffsetReader] and [isb.Closer] and is safe for
// concurrent use. Readers of
// the same buffer, in one process or many, share the consumer: each message
// goes to one of them.
//
// Read returns at most len(buf) messages. It first takes what is there
// without waiting; when that is nothing it waits up to the read timeout (or
// until ctx is done) for one message, then takes what else is there without
// waiting. A Read whose pull the server answered in full (a backlog), with
// a buf as large as any the Reader was given, asks at once for the next
// batch of that size, which is on its way while the caller processes this
// one. So a caller whose reads are trimmed, as by a rate limiter's grant,
// takes from the buffer at most one batch more than it was granted, and a
// caller reading full batches holds at most one batch ahead. A Read of
// frames asks for as many as fill its buf, and keeps the rest of the last
// one for the next Read.
//
// Until a message read (or fetched ahead) is acked or nacked, the Reader
// tells the server every third of the consumer's AckWait that it is still
// in progress, so that a slow batch is not delivered again to another
// reader. A message neither acked nor nacked when the Reader is closed is
// handed back; if its process dies, it is delivered again once AckWait has
// passed.
type Reader struct {
	name  string
	c     *jsconsumer.Consumer
	cons  jetstream.Consumer
	start int64 // the consumer's ack floor when the Reader was made
}

var (
	_ isb.Reader        = (*Reader)(nil)
	_ isb.Nacker        = (*Reader)(nil)
	_ isb.OptionsNacker = (*Reader)(nil)
	_ isb.OffsetReader  = (*Reader)(nil)
	_ isb.AckFloorer    = (*Reader)(nil)
	_ isb.Closer        = (*Reader)(nil)
)

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
	ci := cons.CachedInfo()
	jc, err := jsconsumer.New(c.nc, name, name, jsconsumer.Options{
		Decode:      decode,
		ReadTimeout: readTimeout,
		AckWait:     ci.Config.AckWait,
		FrameSize:   c.cfg.FrameSize,
		FetchAhead:  true,
		Logger:      c.log.With(zap.String("buffer", name)),
	})
	if err != nil {
		return nil, bufferErr("read", name, err)
	}
	return &Reader{name: name, c: jc, cons: cons, start: int64(ci.AckFloor.Stream)}, nil
}

// decode is a buffer's [jsconsumer.DecodeFunc]: the body of a JetStream
// message is one encoded isb.Message, or a frame of them (header
// Sluice-Frame). The messages alias the body.
func decode(msg *nats.Msg, out []isb.Message, keys *jsconsumer.Keys) ([]isb.Message, error) {
	c := msg.Header.Get(frameHeader)
	if c == "" {
		out = append(out, isb.Message{})
		if err := decodeMessage(msg.Data, &out[len(out)-1], keys); err != nil {
			return out[:len(out)-1], err
		}
		return out, nil
	}
	count, err := strconv.Atoi(c)
	if err != nil || count < 1 || count > MaxFrameSize {
		return out, fmt.Errorf("frame of %q messages", c)
	}
	return decodeFrame(msg.Data, count, out, keys)
}

// Read reads at most len(buf) messages into buf; see [Reader]. Each message's
// Handle is the Reader's own; its Value, and its strings (ID, keys, headers),
// alias the message's data, which nothing writes to. A message whose body
// cannot be decoded is terminated (the server drops it) and reported in an
// error matching [ErrDecode], next to the messages read. Reads after Close
// fail with [ErrClosed].
func (r *Reader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	n, err := r.c.Read(ctx, buf)
	if err != nil {
		err = r.err("read", err)
	}
	return n, err
}

// Ack acks msgs and waits until the server has received the acks, so that
// nothing acked before a disconnect is delivered again. It fails when an ack
// cannot be sent or the server does not confirm receipt; acking the same
// messages again is then safe. A frame is acked once all of its messages are
// (or nacked, when one of them was).
func (r *Reader) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	if err := r.c.Ack(ctx, msgs); err != nil {
		return r.err("ack", err)
	}
	return nil
}

// Nack hands msgs back to be delivered again after delay (0: at once), and
// waits until the server has received the NAKs. A message already acked or
// nacked is left as it is. A frame is delivered again whole, once all of its
// messages are acked or nacked: its acked messages too.
func (r *Reader) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	if err := r.c.Nack(ctx, msgs, delay); err != nil {
		return r.err("nack", err)
	}
	return nil
}

// Offset returns the stream sequence of the JetStream message m came in,
// m being a message Read returned: the messages of a frame share it, and a
// message delivered again keeps it. It implements [isb.OffsetReader].
func (r *Reader) Offset(m *isb.ReadMessage) int64 { return int64(r.c.Sequence(m)) }

// StartOffset returns the consumer's ack floor when the Reader was made: the
// stream sequence at or before which every message was acked. It
// implements [isb.OffsetReader].
func (r *Reader) StartOffset() int64 { return r.start }

// NackOptions hands msgs back as Nack does, after opts.Delay, but for those
// delivered opts.MaxDeliveries times already (when it is set), which the
// server drops (a frame whole). It implements [isb.OptionsNacker].
func (r *Reader) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	if err := r.c.NackMax(ctx, msgs, opts.Delay, opts.MaxDeliveries); err != nil {
		return r.err("nack", err)
	}
	return nil
}

// AckFloor returns the consumer's ack floor: the stream sequence at or
// before which every message of the buffer is acked, by any Reader of it. It
// asks the server, in one round trip. It implements [isb.AckFloorer].
func (r *Reader) AckFloor(ctx context.Context) (int64, error) {
	ci, err := r.cons.Info(ctx)
	if err != nil {
		return 0, r.err("info", err)
	}
	return int64(ci.AckFloor.Stream), nil
}

// Close stops the in-progress acks and hands back every message read and not
// yet acked (with the whole frame it came in), so that it is delivered again
// at once rather than after AckWait: close a Reader once its messages are
// acked or given up. Reads after Close fail with [ErrClosed]. Close is safe
// to call twice.
func (r *Reader) Close() error { return r.c.Close() }

// err wraps err of op on the Reader's buffer.
func (r *Reader) err(op string, err error) error {
	if errors.Is(err, jsconsumer.ErrClosed) {
		err = ErrClosed
	}
	return bufferErr(op, r.name, err)
}
