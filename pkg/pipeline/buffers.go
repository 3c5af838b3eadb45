package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// Buffers holds a pipeline's inter-step buffers: [Memory] in one process, or
// [JetStream] across processes.
type Buffers interface {
	// Reader returns a reader of buffer partition b for a vertex reading with
	// readTimeout. The caller closes it if it is an [isb.Closer].
	Reader(ctx context.Context, b BufferSpec, readTimeout time.Duration) (isb.Reader, error)
	// Writer returns a writer to buffer partition b for the vertex from, which
	// counts it full at usageLimit percent of maxLength (the writer's own
	// limits). The caller closes it if it is an [isb.Closer].
	Writer(ctx context.Context, b BufferSpec, from string, maxLength, usageLimit int) (isb.Writer, error)
	// Marks returns the watermark store of the input buffer named name
	// (every partition of it, [Graph.MarksName]).
	Marks(ctx context.Context, name string) (watermark.Store, error)
	// Close releases the buffers, after their readers and writers are closed.
	Close() error
}

// Memory is the buffers of a pipeline running in one process: a bounded
// in-memory buffer per partition, holding bufferUsageLimit percent of
// bufferMaxLength (so that it is full where a JetStream buffer would count as
// full). Messages in it live as long as the process. Its readers implement
// [isb.Nacker] and [isb.OffsetReader], its writers [isb.OffsetWriter]: a
// writer's LastOffset is that of the last message any writer wrote to the
// partition.
type Memory struct {
	buffers map[string]*memory.Buffer
	order   []*memory.Buffer
	mu      sync.Mutex
	marks   map[string]*watermark.MemStore
}

var _ Buffers = (*Memory)(nil)

// NewMemory makes every buffer of the pipeline, each read with its reading
// vertex's readTimeout.
func NewMemory(g Graph) (*Memory, error) {
	m := &Memory{buffers: map[string]*memory.Buffer{}}
	for _, v := range g.vertices {
		for _, b := range g.Inputs(v.name) {
			capacity := max(1, b.MaxLength*b.UsageLimit/100)
			buf := memory.New(b.Name, capacity, v.buffers.ReadTimeout, nil)
			m.buffers[b.Name] = buf
			m.order = append(m.order, buf)
		}
	}
	return m, nil
}

func (m *Memory) get(name string) (*memory.Buffer, error) {
	b, ok := m.buffers[name]
	if !ok {
		return nil, fmt.Errorf("memory buffers: no buffer %q", name)
	}
	return b, nil
}

// shared is a memory buffer as one of the vertices that use it sees it, with
// its offsets: with no Close, since the buffers close it.
type shared struct {
	isb.Reader
	isb.Writer
	isb.Nacker
	isb.OptionsNacker
	isb.OffsetReader
	isb.OffsetWriter
}

func (m *Memory) shared(name string) (shared, error) {
	b, err := m.get(name)
	if err != nil {
		return shared{}, err
	}
	return shared{b, b, b, b, b, b}, nil
}

// Reader implements [Buffers].
func (m *Memory) Reader(_ context.Context, b BufferSpec, _ time.Duration) (isb.Reader, error) {
	return m.shared(b.Name)
}

// Writer implements [Buffers].
func (m *Memory) Writer(_ context.Context, b BufferSpec, _ string, _, _ int) (isb.Writer, error) {
	return m.shared(b.Name)
}

// Marks implements [Buffers]: a store in memory.
func (m *Memory) Marks(_ context.Context, name string) (watermark.Store, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[string]*watermark.MemStore{}
	}
	s := m.marks[name]
	if s == nil {
		s = &watermark.MemStore{}
		m.marks[name] = s
	}
	return s, nil
}

// Left counts the messages in the buffers, read and not acked included.
func (m *Memory) Left() int {
	n := 0
	for _, b := range m.order {
		s := b.Stats()
		n += s.Pending + s.InFlight
	}
	return n
}

// Close implements [Buffers]: what is left in the buffers is lost.
func (m *Memory) Close() error {
	for _, b := range m.order {
		b.Close()
	}
	return nil
}
