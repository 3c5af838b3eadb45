package sideinputs

import (
	"context"
	"sync"
)

// Store keeps the current value of each side input where the vertices find
// it.
type Store interface {
	// Put sets the value of the side input called name.
	Put(ctx context.Context, name string, value []byte) error
	// Watch calls fn, from one goroutine, with the current value of each side
	// input of names that has one, and then with every new value, until ctx
	// ends or the store fails; it returns ctx's error or the store's.
	Watch(ctx context.Context, names []string, fn func(name string, value []byte)) error
}

// Memory is a [Store] for the vertices of one process. The zero value is not
// usable; create one with [NewMemory]. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	values  map[string][]byte
	version map[string]uint64
	changed chan struct{} // closed and replaced at every Put
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{values: map[string][]byte{}, version: map[string]uint64{}, changed: make(chan struct{})}
}

// Put sets name's value; it never fails.
func (m *Memory) Put(_ context.Context, name string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[name] = append([]byte(nil), value...)
	m.version[name]++
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

// Watch calls fn with each value of names as it is put, the current ones
// first, until ctx ends.
func (m *Memory) Watch(ctx context.Context, names []string, fn func(name string, value []byte)) error {
	seen := map[string]uint64{}
	for {
		m.mu.Lock()
		changed := m.changed
		var fresh map[string][]byte
		for _, n := range names {
			if v, ok := m.version[n]; ok && v != seen[n] {
				if fresh == nil {
					fresh = map[string][]byte{}
				}
				fresh[n], seen[n] = m.values[n], v
			}
		}
		m.mu.Unlock()
		for n, v := range fresh {
			fn(n, v)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
