package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
)

// memoryISB is the buffers of a pipeline running in one process: a bounded
// in-memory buffer per partition, holding bufferUsageLimit percent of
// bufferMaxLength (so that it is full where a JetStream buffer would count as
// full). Messages in it live as long as the process.
type memoryISB struct {
	buffers map[string]*memory.Buffer
	order   []*memory.Buffer
}

// newMemoryISB makes every buffer of the pipeline, each read with its reading
// vertex's readTimeout.
func newMemoryISB(g graph) (*memoryISB, error) {
	m := &memoryISB{buffers: map[string]*memory.Buffer{}}
	for _, v := range g.p.Spec.Vertices {
		l, err := g.p.VertexLimits(v.Name)
		if err != nil {
			return nil, err
		}
		for _, b := range g.inputs(v.Name) {
			capacity := max(1, b.maxLength*b.usageLimit/100)
			buf := memory.New(b.name, capacity, l.GetReadTimeout(), nil)
			m.buffers[b.name] = buf
			m.order = append(m.order, buf)
		}
	}
	return m, nil
}

func (m *memoryISB) get(name string) (*memory.Buffer, error) {
	b, ok := m.buffers[name]
	if !ok {
		return nil, fmt.Errorf("memory ISB: no buffer %q", name)
	}
	return b, nil
}

func (m *memoryISB) reader(_ context.Context, b bufferSpec, _ time.Duration) (isb.Reader, func() error, error) {
	buf, err := m.get(b.name)
	return buf, noClose, err
}

func (m *memoryISB) writer(_ context.Context, b bufferSpec, _ string, _, _ int) (isb.Writer, func() error, error) {
	buf, err := m.get(b.name)
	return buf, noClose, err
}

// drained reports whether every buffer is empty, with nothing in flight.
func (m *memoryISB) drained() bool {
	for _, b := range m.order {
		if s := b.Stats(); s.Pending+s.InFlight > 0 {
			return false
		}
	}
	return true
}

// left counts the messages still in the buffers.
func (m *memoryISB) left() int {
	n := 0
	for _, b := range m.order {
		s := b.Stats()
		n += s.Pending + s.InFlight
	}
	return n
}

func (m *memoryISB) close() error {
	for _, b := range m.order {
		b.Close()
	}
	return nil
}

func noClose() error { return nil }
