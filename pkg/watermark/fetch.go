package watermark

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// maxPending is how many entries of one processor a Fetcher keeps waiting
// for the reader to reach their offsets. Past it, the newest one waiting is
// replaced: the older ones are reached sooner.
const maxPending = 8

// Fetcher is the watermark of one reader of one buffer partition: the
// smallest watermark of every live processor writing to the partition, as of
// how far the reader has got in it. It never decreases.
//
// A processor's [Entry] holds the offset of its last write to the partition
// when it published: its watermark says that what it writes after that
// offset is no older. So an entry counts for the reader only once the reader
// has finished every message at or before the entry's offset ([Fetcher.At]);
// until then the processor stays at the watermark of its last entry that
// counted. A processor with entries and none that counts yet holds the
// watermark where it is: the reader has its data still to come.
//
// A processor is live while its latest heartbeat is no older than the
// timeout ([WithTimeout], [DefaultTimeout]) on the fetcher's clock; after
// that it is dropped from the minimum, so a dead replica holds the reader
// back for one timeout at most. A processor that has never published holds
// nothing back until it does, as a vertex in Numaflow knows only the
// processors that have published; what a replica that starts late delivers
// behind the watermark is late. When no live processor counts, the
// watermark stays where it was ([None] at first).
//
// [Fetcher.Refresh] reads the store (about a millisecond for a JetStream
// bucket, so call it on a timer), and [Fetcher.At] computes the watermark
// from what the last Refresh read. Fetcher is safe for concurrent use. The
// zero value is not usable; call [NewFetcher].
type Fetcher struct {
	store     Store
	partition int32
	clock     clock.Clock
	timeout   time.Duration

	mu    sync.Mutex
	procs map[string]*procMarks
	wm    time.Time
}

// procMarks is what a Fetcher knows of one processor.
type procMarks struct {
	heartbeat time.Time
	counted   time.Time // None until an entry counts
	pending   []Entry   // offsets and watermarks increasing
}

// NewFetcher returns the watermark of a reader of partition of the edge
// whose processors publish to store. It takes [WithClock] and [WithTimeout],
// and fails with [ErrNoStore] given a nil store.
func NewFetcher(store Store, partition int32, opts ...Option) (*Fetcher, error) {
	if store == nil {
		return nil, ErrNoStore
	}
	o := buildOptions(opts)
	return &Fetcher{store: store, partition: partition, clock: o.clock, timeout: o.timeout,
		procs: map[string]*procMarks{}, wm: None()}, nil
}

// Refresh reads the store: each processor's latest entry for the partition
// waits for the reader to reach its offset, and a processor with no entry
// any more (one that stopped cleanly) is forgotten. When the store cannot be
// read it returns the store's error and keeps what it knew.
func (f *Fetcher) Refresh(ctx context.Context) error {
	entries, err := f.store.Entries(ctx)
	if err != nil {
		return fmt.Errorf("watermark: fetch partition %d: %w", f.partition, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := make(map[string]bool, len(f.procs))
	for _, e := range entries {
		if e.Partition != f.partition || IsNone(e.Watermark) {
			continue
		}
		seen[e.Processor] = true
		p := f.procs[e.Processor]
		if p == nil {
			p = &procMarks{counted: None()}
			f.procs[e.Processor] = p
		}
		p.add(e)
	}
	for name := range f.procs {
		if !seen[name] {
			delete(f.procs, name)
		}
	}
	return nil
}

// add takes e, the processor's latest entry, to wait for its offset.
func (p *procMarks) add(e Entry) {
	if e.Heartbeat.After(p.heartbeat) {
		p.heartbeat = e.Heartbeat
	}
	last := p.counted
	if n := len(p.pending); n > 0 {
		last = p.pending[n-1].Watermark
	}
	if !e.Watermark.After(last) {
		return
	}
	if n := len(p.pending); n > 0 && e.Offset < p.pending[n-1].Offset {
		return // an entry from before a restart of the store; the next one is newer
	}
	if len(p.pending) == maxPending {
		p.pending[maxPending-1] = e
		return
	}
	p.pending = append(p.pending, e)
}

// reach counts the entries at or before offset.
func (p *procMarks) reach(offset int64) {
	i := 0
	for ; i < len(p.pending) && p.pending[i].Offset <= offset; i++ {
		p.counted = p.pending[i].Watermark
	}
	p.pending = append(p.pending[:0], p.pending[i:]...)
}

// At returns the reader's watermark once it has finished every message of
// the partition at or before offset (acked it, or handed it back), at the
// clock's now, from what the last [Fetcher.Refresh] read. Offsets passed to
// At are to grow; a smaller one changes nothing.
func (f *Fetcher) At(offset int64) time.Time {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var low time.Time
	found := false
	for _, p := range f.procs {
		p.reach(offset)
		if now.Sub(p.heartbeat) > f.timeout {
			continue
		}
		if IsNone(p.counted) {
			return f.wm // its data is still to come
		}
		if !found || p.counted.Before(low) {
			low, found = p.counted, true
		}
	}
	if found && low.After(f.wm) {
		f.wm = low
	}
	return f.wm
}

// Last returns the watermark the last call of At returned.
func (f *Fetcher) Last() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wm
}
