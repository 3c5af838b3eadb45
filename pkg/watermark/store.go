package watermark

import (
	"context"
	"sync"
)

// Store holds the latest [Entry] of every processor and partition of one
// edge: what the processors writing to the edge's buffer publish, and what
// the vertices reading it fetch. A vertex that reads several edges reads one
// Store per edge.
//
// Contract, for every implementation:
//
//   - Put replaces the entry of e.Processor and e.Partition with e. It never
//     compares watermarks or heartbeats: the last Put wins. An error means the
//     entry may not be stored; the publisher's next Put or heartbeat stores it
//     again. Put blocks for at most one round trip to the backing service.
//   - Entries returns the latest entry of every processor and partition, in
//     no particular order: a whole snapshot as of some moment during the
//     call, never part of one. An entry put concurrently may or may not be
//     in it. On error it returns no entries.
//   - Delete removes every entry of processor; removing none is not an error.
//   - Every method honours ctx's deadline and cancellation, and is safe for
//     concurrent use.
//
// [MemStore] is the store of one process; jsstore is a JetStream key-value
// bucket shared by processes.
type Store interface {
	Put(ctx context.Context, e Entry) error
	Entries(ctx context.Context) ([]Entry, error)
	Delete(ctx context.Context, processor string) error
}

var _ Store = (*MemStore)(nil)

// MemStore is a [Store] in memory, for processors and vertices of one process
// (the memory buffers of a pipeline run in one process). The zero value is an
// empty store ready to use; it is safe for concurrent use and never fails
// except when ctx is done.
type MemStore struct {
	mu      sync.Mutex
	entries map[memKey]Entry
}

type memKey struct {
	processor string
	partition int32
}

// Put stores e as the entry of its processor and partition.
func (s *MemStore) Put(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[memKey]Entry{}
	}
	s.entries[memKey{e.Processor, e.Partition}] = e
	return nil
}

// Entries returns a copy of every entry.
func (s *MemStore) Entries(ctx context.Context) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e)
	}
	return out, nil
}

// Delete removes every entry of processor.
func (s *MemStore) Delete(ctx context.Context, processor string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.entries {
		if k.processor == processor {
			delete(s.entries, k)
		}
	}
	return nil
}
