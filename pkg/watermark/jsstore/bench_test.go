package jsstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// BenchmarkEntries is one read of a bucket holding 8 processors on 4
// partitions: what a vertex's fetch costs on JetStream.
func BenchmarkEntries(b *testing.B) {
	benchmarkStore(b, func(st watermark.Store) error {
		_, err := st.Entries(b.Context())
		return err
	})
}

// BenchmarkPut is one publish of a watermark.
func BenchmarkPut(b *testing.B) {
	i := 0
	benchmarkStore(b, func(st watermark.Store) error {
		i++
		return st.Put(b.Context(), watermark.Entry{Processor: "p-0", Partition: 0, Watermark: at(time.Duration(i)), Heartbeat: t0})
	})
}

func benchmarkStore(b *testing.B, op func(watermark.Store) error) {
	s := natstest.Start(b, natstest.Options{})
	st := openB(b, s)
	for i := range 8 {
		for part := range int32(4) {
			if err := st.Put(b.Context(), watermark.Entry{Processor: fmt.Sprintf("p-%d", i), Partition: part, Watermark: at(time.Second), Heartbeat: t0}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := op(st); err != nil {
			b.Fatal(err)
		}
	}
}
