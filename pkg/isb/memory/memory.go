// Package memory is an in-memory, bounded inter-step buffer for one process: a
// vertex's output written to it is read by the next vertex in the same process. It
// is also what tests use as a source and a sink that count what they see.
package memory

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Buffer is a bounded FIFO of messages with acks. Messages read and not acked are
// in flight; they count against the capacity until acked, and Nak puts them back.
// Buffer is safe for concurrent use.
type Buffer struct {
	name        string
	capacity    int
	readTimeout time.Duration
	clk         clock.Clock

	mu       sync.Mutex
	pending  []isb.Message
	inflight map[string]isb.Message
	seq      uint64
	acked    uint64
	closed   bool
	notify   chan struct{} // closed and replaced at every write, ack, nak and Close
}

var (
	_ isb.Reader = (*Buffer)(nil)
	_ isb.Writer = (*Buffer)(nil)
	_ isb.Naker  = (*Buffer)(nil)
)

// New returns an empty buffer holding at most capacity messages, whose reads wait at
// most readTimeout for messages. clk may be nil for the wall clock.
func New(name string, capacity int, readTimeout time.Duration, clk clock.Clock) *Buffer {
	if clk == nil {
		clk = clock.Real()
	}
	return &Buffer{name: name, capacity: capacity, readTimeout: readTimeout, clk: clk,
		inflight: map[string]isb.Message{}, notify: make(chan struct{})}
}

// ErrClosed is returned for messages written to a closed buffer.
var ErrClosed = errors.New("memory: buffer closed")

// Write appends msgs in order while there is room; the rest get [isb.ErrBufferFull]
// (or [ErrClosed] once the buffer is closed).
func (b *Buffer) Write(_ context.Context, msgs []isb.Message, errs []error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.capacity - len(b.pending) - len(b.inflight)
	for i := range msgs {
		if b.closed {
			errs[i] = ErrClosed
			continue
		}
		if room <= 0 {
			errs[i] = isb.ErrBufferFull
			continue
		}
		b.pending = append(b.pending, msgs[i])
		errs[i] = nil
		room--
	}
	b.wake()
	return nil
}

// Read moves up to len(buf) messages from the front of the buffer into buf, waiting
// up to the read timeout when it is empty.
func (b *Buffer) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	var timeout <-chan struct{}
	for {
		b.mu.Lock()
		if n := min(len(buf), len(b.pending)); n > 0 || b.closed {
			for i := range n {
				b.seq++
				key := b.name + "-" + strconv.FormatUint(b.seq, 10)
				m := b.pending[i]
				if m.ID == "" {
					m.ID = key
				}
				buf[i] = isb.ReadMessage{Message: m, Handle: key}
				b.inflight[key] = m // a message read again after Nak keeps its id
			}
			clear(b.pending[:n])
			b.pending = b.pending[n:]
			b.mu.Unlock()
			return n, nil
		}
		wait := b.notify
		b.mu.Unlock()
		if timeout == nil {
			done := make(chan struct{})
			t := b.clk.AfterFunc(b.readTimeout, func() { close(done) })
			defer t.Stop()
			timeout = done
		}
		select {
		case <-wait:
		case <-timeout:
			return 0, nil
		case <-ctx.Done():
			return 0, nil
		}
	}
}

// Ack removes acked messages from flight.
func (b *Buffer) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range msgs {
		key, _ := msgs[i].Handle.(string)
		if _, ok := b.inflight[key]; ok {
			delete(b.inflight, key)
			b.acked++
		}
	}
	b.wake()
	return nil
}

// WaitAcked waits until at least n messages have been acked in all, or ctx is done.
func (b *Buffer) WaitAcked(ctx context.Context, n uint64) error {
	return b.waitUntil(ctx, func() bool { return b.acked >= n })
}

// WaitPending waits until at least n messages wait to be read, or ctx is done.
func (b *Buffer) WaitPending(ctx context.Context, n int) error {
	return b.waitUntil(ctx, func() bool { return len(b.pending) >= n })
}

// waitUntil waits until cond, checked with b.mu held, is true.
func (b *Buffer) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		b.mu.Lock()
		ok, wait := cond(), b.notify
		b.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Nak puts messages in flight back at the front of the buffer, to be read again:
// at once, or once delay has passed on the buffer's clock (they stay in flight,
// and count against the capacity, until then).
func (b *Buffer) Nak(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	keys := make([]string, 0, len(msgs))
	for i := range msgs {
		if key, ok := msgs[i].Handle.(string); ok {
			keys = append(keys, key)
		}
	}
	if delay <= 0 {
		b.putBack(keys)
		return nil
	}
	b.clk.AfterFunc(delay, func() { b.putBack(keys) })
	return nil
}

// putBack moves the messages of keys that are still in flight to the front.
func (b *Buffer) putBack(keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	back := make([]isb.Message, 0, len(keys)+len(b.pending))
	for _, key := range keys {
		if m, ok := b.inflight[key]; ok {
			delete(b.inflight, key)
			back = append(back, m)
		}
	}
	b.pending = append(back, b.pending...)
	b.wake()
}

// Close makes reads return at once and writes fail; messages left stay readable.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.wake()
	return nil
}

// Stats is a snapshot of a buffer.
type Stats struct {
	Pending, InFlight int
	Acked             uint64
}

// Stats returns the buffer's counts.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Pending: len(b.pending), InFlight: len(b.inflight), Acked: b.acked}
}

// Messages returns a copy of the messages waiting to be read.
func (b *Buffer) Messages() []isb.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]isb.Message(nil), b.pending...)
}

func (b *Buffer) wake() {
	close(b.notify)
	b.notify = make(chan struct{})
}
