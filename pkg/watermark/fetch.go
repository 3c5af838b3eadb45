package watermark

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Fetcher is the watermark of a vertex (or of one of its replicas): the
// smallest watermark of every live upstream processor on every partition the
// vertex reads, over the stores of every edge it reads. It never decreases.
//
// A processor is live while its entry's heartbeat is no older than the
// timeout ([WithTimeout], [DefaultTimeout]) on the fetcher's clock; after
// that it is dropped from the minimum, so a dead replica holds the vertex
// back for one timeout at most. A processor that has never published holds
// nothing back until it does, as a vertex in Numaflow knows only the
// processors that have published: an upstream replica that starts late may
// then deliver data behind the vertex's watermark, which is late.
//
// When no live processor has an entry, the watermark stays where it was
// ([None] at first).
//
// Fetcher is safe for concurrent use. The zero value is not usable; call
// [NewFetcher].
type Fetcher struct {
	stores     []Store
	partitions []int32 // nil: every partition
	clock      clock.Clock
	timeout    time.Duration

	mu sync.Mutex
	wm time.Time
}

// NewFetcher returns the watermark of a vertex that reads the given
// partitions (every partition when there are none) of the edges whose stores
// are given. It takes [WithClock] and [WithTimeout], and fails with
// [ErrNoStore] given no store.
func NewFetcher(stores []Store, partitions []int32, opts ...Option) (*Fetcher, error) {
	if len(stores) == 0 {
		return nil, ErrNoStore
	}
	o := buildOptions(opts)
	var parts []int32
	if len(partitions) > 0 {
		parts = slices.Clone(partitions)
	}
	return &Fetcher{stores: slices.Clone(stores), partitions: parts, clock: o.clock, timeout: o.timeout, wm: None()}, nil
}

// Watermark reads every store and returns the vertex's watermark at the
// clock's now. When a store cannot be read it returns the last watermark
// with the store's error; the watermark does not move.
func (f *Fetcher) Watermark(ctx context.Context) (time.Time, error) {
	now := f.clock.Now()
	var low time.Time
	found := false
	for i, s := range f.stores {
		entries, err := s.Entries(ctx)
		if err != nil {
			return f.Last(), fmt.Errorf("watermark: fetch from store %d: %w", i, err)
		}
		for _, e := range entries {
			if !f.counts(e, now) {
				continue
			}
			if !found || e.Watermark.Before(low) {
				low, found = e.Watermark, true
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if found && low.After(f.wm) {
		f.wm = low
	}
	return f.wm, nil
}

// Last returns the watermark the last call of Watermark returned, without
// reading the stores.
func (f *Fetcher) Last() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wm
}

// counts reports whether e takes part in the minimum at now: a partition the
// vertex reads, a watermark, and a heartbeat within the timeout.
func (f *Fetcher) counts(e Entry, now time.Time) bool {
	if f.partitions != nil && !slices.Contains(f.partitions, e.Partition) {
		return false
	}
	if IsNone(e.Watermark) {
		return false
	}
	return now.Sub(e.Heartbeat) <= f.timeout
}
