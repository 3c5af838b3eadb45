package watermark

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Publisher publishes one processor's watermark, per partition of the
// edge it writes to, to a [Store], with heartbeats that tell the vertices
// downstream that the processor is alive.
//
// What it publishes for a partition never decreases: [Publisher.Publish]
// of a watermark not after the last one published for the partition stores
// nothing. A publisher created under the name of a processor that has
// entries in the store (a replica restarted under its pod name) starts from
// them, so a restart never moves an entry back.
//
// A processor publishes nothing for a partition until it has a watermark;
// [Publisher.Run] keeps the heartbeats of the partitions it has published
// fresh, and [Publisher.Close] removes its entries so that it stops holding
// the vertices downstream back at once.
//
// Publisher is safe for concurrent use. The zero value is not usable; call
// [NewPublisher].
type Publisher struct {
	store     Store
	processor string
	clock     clock.Clock
	interval  time.Duration
	onError   func(error)

	mu     sync.Mutex // held across puts, so that they reach the store in order
	marks  map[int32]mark
	closed bool
}

// NewPublisher returns the publisher of processor to store, starting from
// the processor's entries already in the store. It takes [WithClock],
// [WithHeartbeatInterval] and [WithErrorHandler]. It fails with
// [ErrInvalidProcessor] for a name [ValidProcessor] rejects, and with the
// store's error when it cannot read the store.
func NewPublisher(ctx context.Context, store Store, processor string, opts ...Option) (*Publisher, error) {
	if !ValidProcessor(processor) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidProcessor, processor)
	}
	entries, err := store.Entries(ctx)
	if err != nil {
		return nil, fmt.Errorf("watermark: publisher %s: read the store: %w", processor, err)
	}
	o := buildOptions(opts)
	p := &Publisher{store: store, processor: processor, clock: o.clock, interval: o.heartbeat,
		onError: o.onError, marks: map[int32]mark{}}
	for _, e := range entries {
		if e.Processor == processor && !IsNone(e.Watermark) {
			p.marks[e.Partition] = mark{e.Watermark, e.Offset}
		}
	}
	return p, nil
}

// Publish publishes wm, in whole milliseconds ([Millis]), as the processor's
// watermark for partition from offset on, with a heartbeat at the clock's
// now: offset is at or after that of everything the processor has written
// to the partition (the LastOffset of its isb.OffsetWriter), and what it
// writes from now on is no older than wm. It stores nothing and returns nil
// when wm is [None] or not after the partition's last watermark. It returns [ErrClosed] after Close, and the store's error
// (the watermark is then kept, and the next heartbeat stores it).
func (p *Publisher) Publish(ctx context.Context, partition int32, wm time.Time, offset int64) error {
	if IsNone(wm) {
		return nil
	}
	wm = Millis(wm)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if last, ok := p.marks[partition]; ok && !wm.After(last.wm) {
		return nil
	}
	m := mark{wm, offset}
	p.marks[partition] = m
	return p.put(ctx, partition, m)
}

// Heartbeat stores every partition's last watermark again with a heartbeat
// at the clock's now. It returns the errors of the puts that failed, joined,
// and [ErrClosed] after Close.
func (p *Publisher) Heartbeat(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	var errs []error
	for part, m := range p.marks {
		if err := p.put(ctx, part, m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run sends a heartbeat every heartbeat interval until ctx is done or the
// publisher is closed, and then returns nil. A failed heartbeat goes to the
// error handler ([WithErrorHandler]) and Run goes on.
func (p *Publisher) Run(ctx context.Context) error {
	for clock.Sleep(ctx, p.clock, p.interval) {
		err := p.Heartbeat(ctx)
		if errors.Is(err, ErrClosed) {
			return nil
		}
		if err != nil && p.onError != nil && ctx.Err() == nil {
			p.onError(err)
		}
	}
	return nil
}

// Close removes the processor's entries from the store and stops the
// publisher: later calls return [ErrClosed], and Run returns. A second Close
// returns nil and does nothing. It returns the store's error when the
// entries could not be removed; the vertices downstream then drop them when
// their heartbeat times out.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if err := p.store.Delete(ctx, p.processor); err != nil {
		return fmt.Errorf("watermark: publisher %s: remove entries: %w", p.processor, err)
	}
	return nil
}

// mark is a partition's last watermark and the offset it holds from.
type mark struct {
	wm     time.Time
	offset int64
}

func (p *Publisher) put(ctx context.Context, partition int32, m mark) error {
	e := Entry{Processor: p.processor, Partition: partition, Watermark: m.wm, Offset: m.offset, Heartbeat: Millis(p.clock.Now())}
	if err := p.store.Put(ctx, e); err != nil {
		return fmt.Errorf("watermark: publisher %s: put partition %d: %w", p.processor, partition, err)
	}
	return nil
}
