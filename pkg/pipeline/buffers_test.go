package pipeline_test

import (
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/pipeline"
)

// A memory buffer's readers and writers, as vertices get them, have its
// offsets, and no Close: the buffers close it.
func TestMemoryOffsets(t *testing.T) {
	g := pipeline.NewGraph(parse(t, "offsets", threeVertices("")))
	m, err := pipeline.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	spec := g.Inputs("cat")[0]
	w, err := m.Writer(t.Context(), spec, "in", spec.MaxLength, spec.UsageLimit)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Reader(t.Context(), spec, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ow, ok := w.(isb.OffsetWriter)
	if !ok {
		t.Fatalf("a memory writer (%T) is no isb.OffsetWriter", w)
	}
	or, ok := r.(isb.OffsetReader)
	if !ok {
		t.Fatalf("a memory reader (%T) is no isb.OffsetReader", r)
	}
	if _, ok := r.(isb.Closer); ok {
		t.Fatal("a memory reader has a Close")
	}
	errs := make([]error, 2)
	if err := w.Write(t.Context(), []isb.Message{{Value: []byte("a")}, {Value: []byte("b")}}, errs); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Write = %v, %v", err, errs)
	}
	if o := ow.LastOffset(); o != 2 {
		t.Fatalf("LastOffset = %d, want 2", o)
	}
	buf := make([]isb.ReadMessage, 2)
	n, err := r.Read(t.Context(), buf)
	if err != nil || n != 2 {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if a, b, s := or.Offset(&buf[0]), or.Offset(&buf[1]), or.StartOffset(); a != 1 || b != 2 || s != 0 {
		t.Fatalf("offsets %d and %d, start %d; want 1 and 2, start 0", a, b, s)
	}
}
