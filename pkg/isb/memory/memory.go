// Package memory is an in-memory, bounded inter-step buffer for one process: a
// vertex's output written to it is read by the next vertex in the same process. It
// is also what tests use as a source and a sink that count what they see.
//
// # Offsets
//
// Write gives each message the buffer's next offset (1, 2, 3...), which it
// keeps when it is nacked and read again: [Buffer.Offset] returns it.
// [Buffer.LastOffset] is the offset of the last message written by any
// writer, at or after that of every message the caller wrote. A message
// without an ID is read with the ID <buffer name>-<offset>. The buffer
// starts empty, so [Buffer.StartOffset] is 0.
package memory

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Buffer is a bounded FIFO of messages with acks. Messages read and not acked are
// in flight; they count against the capacity until acked, and Nack puts them back.
// Each message has the offset Write gave it (see the package doc). Buffer
// implements [isb.Reader], [isb.Writer], [isb.Nacker], [isb.OffsetReader] and
// [isb.OffsetWriter], and is safe for concurrent use.
type Buffer struct {
	name        string
	capacity    int
	readTimeout time.Duration
	clk         clock.Clock

	mu       sync.Mutex
	pending  []entry
	inflight map[*handle]isb.Message
	last     atomic.Int64 // the offset of the last message written; raised with mu held
	acked    uint64
	closed   bool
	notify   chan struct{} // closed and replaced at every write, ack, nack and Close
}

// entry is a message in the buffer with its offset, and how many times it
// was read before.
type entry struct {
	msg        isb.Message
	off        int64
	deliveries uint32
}

// handle is the Handle of a message read, with how many times it has been
// read, this time included. Every read makes a new one, so a handle from a
// read before a Nack acks nothing.
type handle struct {
	off        int64
	deliveries uint32
}

var (
	_ isb.Reader        = (*Buffer)(nil)
	_ isb.Writer        = (*Buffer)(nil)
	_ isb.Nacker        = (*Buffer)(nil)
	_ isb.OptionsNacker = (*Buffer)(nil)
	_ isb.OffsetReader  = (*Buffer)(nil)
	_ isb.OffsetWriter  = (*Buffer)(nil)
)

// New returns an empty buffer holding at most capacity messages, whose reads wait at
// most readTimeout for messages. clk may be nil for the wall clock.
func New(name string, capacity int, readTimeout time.Duration, clk clock.Clock) *Buffer {
	if clk == nil {
		clk = clock.Real()
	}
	return &Buffer{name: name, capacity: capacity, readTimeout: readTimeout, clk: clk,
		inflight: map[*handle]isb.Message{}, notify: make(chan struct{})}
}

// ErrClosed is returned for messages written to a closed buffer.
var ErrClosed = errors.New("memory: buffer closed")

// Write appends msgs in order while there is room, each with the buffer's next
// offset; the rest get [isb.ErrBufferFull] (or [ErrClosed] once the buffer is
// closed).
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
		b.pending = append(b.pending, entry{msg: msgs[i], off: b.last.Add(1)})
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
				e := b.pending[i]
				if e.msg.ID == "" {
					e.msg.ID = b.name + "-" + strconv.FormatInt(e.off, 10)
				}
				h := &handle{off: e.off, deliveries: e.deliveries + 1}
				buf[i] = isb.ReadMessage{Message: e.msg, Handle: h}
				b.inflight[h] = e.msg
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
		h, _ := msgs[i].Handle.(*handle)
		if _, ok := b.inflight[h]; ok {
			delete(b.inflight, h)
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

// Nack puts messages in flight back at the front of the buffer, to be read again:
// at once, or once delay has passed on the buffer's clock (they stay in flight,
// and count against the capacity, until then).
func (b *Buffer) Nack(_ context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	hs := make([]*handle, 0, len(msgs))
	for i := range msgs {
		if h, ok := msgs[i].Handle.(*handle); ok {
			hs = append(hs, h)
		}
	}
	if delay <= 0 {
		b.putBack(hs)
		return nil
	}
	b.clk.AfterFunc(delay, func() { b.putBack(hs) })
	return nil
}

// NackOptions hands msgs back as Nack does, after opts.Delay, but for those
// read opts.MaxDeliveries times already (when it is set), which it drops as
// acked. It implements [isb.OptionsNacker].
func (b *Buffer) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	if opts.MaxDeliveries == 0 {
		return b.Nack(ctx, msgs, opts.Delay)
	}
	var again, done []isb.ReadMessage
	for i := range msgs {
		if h, ok := msgs[i].Handle.(*handle); ok && h.deliveries >= opts.MaxDeliveries {
			done = append(done, msgs[i])
		} else {
			again = append(again, msgs[i])
		}
	}
	if err := b.Ack(ctx, done); err != nil {
		return err
	}
	return b.Nack(ctx, again, opts.Delay)
}

// putBack moves the messages of hs that are still in flight to the front,
// with their offsets and IDs.
func (b *Buffer) putBack(hs []*handle) {
	b.mu.Lock()
	defer b.mu.Unlock()
	back := make([]entry, 0, len(hs)+len(b.pending))
	for _, h := range hs {
		if m, ok := b.inflight[h]; ok {
			delete(b.inflight, h)
			back = append(back, entry{msg: m, off: h.off, deliveries: h.deliveries})
		}
	}
	b.pending = append(back, b.pending...)
	b.wake()
}

// Offset returns the offset Write gave m, a message Read returned; 0 for a
// message this buffer did not return. It implements [isb.OffsetReader].
func (b *Buffer) Offset(m *isb.ReadMessage) int64 {
	if h, ok := m.Handle.(*handle); ok {
		return h.off
	}
	return 0
}

// StartOffset returns 0: a buffer starts empty. It implements
// [isb.OffsetReader].
func (b *Buffer) StartOffset() int64 { return 0 }

// LastOffset returns the offset of the last message written to the buffer by
// any writer, 0 before any. It implements [isb.OffsetWriter].
func (b *Buffer) LastOffset() int64 { return b.last.Load() }

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
	out := make([]isb.Message, len(b.pending))
	for i := range b.pending {
		out[i] = b.pending[i].msg
	}
	return out
}

func (b *Buffer) wake() {
	close(b.notify)
	b.notify = make(chan struct{})
}
