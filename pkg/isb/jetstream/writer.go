package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

const (
	// RefreshInterval is how often a Writer asks the server how many
	// messages its buffer holds, for the soft full check.
	RefreshInterval = 200 * time.Millisecond
	// PublishTimeout bounds the wait for the server's acknowledgement of one
	// published message when the caller's context has no earlier deadline.
	PublishTimeout = 10 * time.Second
)

// errCodeStoreFailed is the server's error code for a message it could not
// store; a stream at its MaxMsgs with DiscardNew answers it with the
// description "maximum messages exceeded".
const errCodeStoreFailed jetstream.ErrorCode = 10077

// Writer writes messages to one buffer. It implements [isb.Writer] and
// [isb.Closer] and is safe for concurrent use.
//
// Write publishes every message of the batch without waiting, then waits for
// the server's acknowledgements (bounded by ctx and [PublishTimeout]), and
// records per message: nil when stored (a duplicate the stream dropped counts
// as stored), an error matching [isb.ErrBufferFull] when the stream refused it
// for holding MaxLength messages, another error (retryable) otherwise.
//
// Before publishing, Write checks the buffer's usage the way Numaflow does:
// when the stream holds MaxLength*UsageLimit/100 messages or more, the whole
// batch gets [isb.ErrBufferFull] and nothing is published. The count is the
// stream's, refreshed every [RefreshInterval] by a goroutine the Writer owns,
// plus the messages this Writer has stored since; other writers' messages
// show up at the next refresh. When that estimate reaches the limit, Write
// reads the stream's count again before refusing the batch.
//
// Every message carries the header Nats-Msg-Id = from + ":" + its ID, so the
// stream drops a message written again within the duplicate window (a retry
// after a lost acknowledgement) while the same ID from another vertex is
// kept. Messages with an empty ID carry no such header and are never dropped.
type Writer struct {
	name, subject, from string
	soft                int64 // full when stored+published >= soft
	js                  jetstream.JetStream
	log                 *zap.Logger
	err                 error // a bad spec: every Write returns it
	errFull             error // matches isb.ErrBufferFull, names the buffer

	refreshMu sync.Mutex   // serialises refreshes
	stored    atomic.Int64 // messages in the stream at the last refresh; -1 before the first
	published atomic.Int64 // messages this writer stored since the last refresh began

	closed    atomic.Bool
	stop      context.CancelFunc
	done      chan struct{} // closed when the refresh goroutine has returned
	closeOnce sync.Once
}

var (
	_ isb.Writer = (*Writer)(nil)
	_ isb.Closer = (*Writer)(nil)
)

// Writer returns a writer to the buffer spec describes (created with
// CreateBuffer); from is the writing vertex's name, which scopes message IDs
// for deduplication. spec must be valid: with an invalid spec every Write
// returns the validation error. Close the Writer to stop its refresh
// goroutine.
func (c *Conn) Writer(spec BufferSpec, from string) *Writer {
	w := &Writer{
		name:    spec.Name,
		subject: subject(spec.Name),
		from:    from,
		log:     c.log.With(zap.String("buffer", spec.Name)),
		errFull: fmt.Errorf("jetstream: buffer %s: %w", spec.Name, isb.ErrBufferFull),
		done:    make(chan struct{}),
	}
	w.stored.Store(-1)
	w.err = spec.validate()
	if w.err == nil && strings.ContainsAny(from, "\r\n") {
		w.err = fmt.Errorf("%w: buffer %s: writer name %q has a line break", ErrInvalidConfig, spec.Name, from)
	}
	if w.err == nil {
		// Its own JetStream context: its own pending-ack table and
		// reply subscription, released by Close.
		w.js, w.err = jetstream.New(c.nc, jetstream.WithPublishAsyncTimeout(PublishTimeout))
	}
	if w.err != nil {
		close(w.done)
		w.stop = func() {}
		return w
	}
	w.soft = (int64(spec.MaxLength)*int64(spec.UsageLimit) + 99) / 100
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go w.refreshLoop(ctx)
	return w
}

// Write publishes msgs and records what became of each in errs; see [Writer].
// It returns a non-nil error only for a bad spec, a closed Writer or a ctx
// already done. A message larger than the server's max_payload (1 MiB by
// default) fails with nats.ErrMaxPayload.
func (w *Writer) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	if w.err != nil {
		return w.err
	}
	if w.closed.Load() {
		return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, err)
	}
	full, err := w.full(ctx)
	if err != nil || full {
		if err == nil {
			err = w.errFull
		}
		for i := range errs[:len(msgs)] {
			errs[i] = err
		}
		return nil
	}

	// One arena for the batch's bodies, never reused: a publish retried by
	// nats.go after Write returned still reads its body.
	size := 0
	for i := range msgs {
		size += encodedSize(&msgs[i])
	}
	arena := make([]byte, 0, size)
	acks := make([]jetstream.PubAckFuture, len(msgs))
	for i := range msgs {
		start := len(arena)
		arena = appendMessage(arena, &msgs[i])
		m := &nats.Msg{Subject: w.subject, Data: arena[start:len(arena):len(arena)]}
		if id := msgs[i].ID; id != "" {
			if strings.ContainsAny(id, "\r\n") {
				errs[i] = fmt.Errorf("%w: buffer %s: message id %q has a line break", ErrInvalidConfig, w.name, id)
				continue
			}
			m.Header = nats.Header{jetstream.MsgIDHeader: []string{w.from + ":" + id}}
		}
		if acks[i], err = w.js.PublishMsgAsync(m); err != nil {
			errs[i] = w.publishErr(err)
		}
	}

	var stored int64
	for i, ack := range acks {
		if ack == nil {
			continue
		}
		select {
		case <-ack.Ok():
			errs[i] = nil
			stored++
		case err := <-ack.Err():
			errs[i] = w.publishErr(err)
		case <-ctx.Done():
			err := fmt.Errorf("jetstream: write to buffer %s: waiting for the server: %w", w.name, ctx.Err())
			for j := i; j < len(acks); j++ {
				if acks[j] != nil {
					errs[j] = err
				}
			}
			w.published.Add(stored)
			return nil
		}
	}
	w.published.Add(stored)
	return nil
}

// publishErr classifies a failed publish: a full stream gives w.errFull.
func (w *Writer) publishErr(err error) error {
	// The server has no error code of its own for a full stream: it answers
	// "store failed" with the description "maximum messages exceeded".
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed &&
		strings.HasPrefix(apiErr.Description, "maximum messages exceeded") {
		return w.errFull
	}
	return fmt.Errorf("jetstream: write to buffer %s: %w", w.name, connErr(err))
}

// full reports whether the buffer is at its usage limit. The count is read
// from the server first if it never was, and again before saying full: the
// estimate only grows between refreshes, as readers' acks are not seen.
func (w *Writer) full(ctx context.Context) (bool, error) {
	if w.stored.Load() >= 0 && w.stored.Load()+w.published.Load() < w.soft {
		return false, nil
	}
	if err := w.refresh(ctx); err != nil {
		return false, err
	}
	return w.stored.Load()+w.published.Load() >= w.soft, nil
}

// refresh reads the number of messages in the stream.
func (w *Writer) refresh(ctx context.Context) error {
	w.refreshMu.Lock()
	defer w.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// Messages stored from now on may or may not be in the answer; counting
	// them twice until the next refresh errs on the side of full.
	before := w.published.Load()
	s, err := w.js.Stream(ctx, w.name)
	if err != nil {
		return bufferErr("read the usage of", w.name, err)
	}
	w.stored.Store(int64(s.CachedInfo().State.Msgs))
	w.published.Add(-before)
	return nil
}

// refreshLoop refreshes the count every RefreshInterval until ctx is done.
func (w *Writer) refreshLoop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.refresh(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			w.log.Warn("cannot read the buffer's usage; using the last count", zap.Error(err))
		case err == nil && failing:
			w.log.Info("reading the buffer's usage again")
		}
		failing = err != nil
	}
}

// Close stops the refresh goroutine and fails the acknowledgements still
// awaited. Writes after Close fail with [ErrClosed]. Close is safe to call
// twice.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		w.stop()
		<-w.done
		if w.js != nil {
			w.js.CleanupPublisher()
		}
	})
	return nil
}
