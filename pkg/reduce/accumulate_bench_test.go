package reduce

import (
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// BenchmarkAccumulatorLog runs one always-active key for 1, 5 and 10
// minutes on a manual clock, 500 messages of 100 bytes a second with the
// watermark a second behind, through a sorter and a log of the size an
// accumulator vertex's is (AccumulatorSegmentSize), committing every
// second; then it times the replay of a restart on that log. ns/op is the
// replay's time (open and Recover), log-bytes the log's size, replayed-msgs
// the messages the replay brings back, and logged-msgs the messages
// appended over the run.
func BenchmarkAccumulatorLog(b *testing.B) {
	c := serveSorter(b, 0)
	for _, minutes := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("minutes=%d", minutes), func(b *testing.B) {
			dir := b.TempDir()
			l := openLog(b, dir, AccumulatorSegmentSize)
			a, _ := newAcc(b, c, l)
			st := newStream("k", 500, 100)
			var prev []isb.Message
			for range minutes * 60 {
				msgs := st.next()
				accAdd(b, a, msgs)
				accAdvance(b, a, st.watermark(), len(prev))
				accCommit(b, a)
				prev = msgs
			}
			var size int64
			for _, s := range l.Segments() {
				size += s.Size
			}
			a.Close()
			l.Close()
			idle := accumulatorclient.New(b.TempDir(), zap.NewNop()) // a replay opens no stream
			n := 0
			for b.Loop() {
				l, err := wal.Open(dir, wal.Options{SegmentSize: AccumulatorSegmentSize})
				if err != nil {
					b.Fatal(err)
				}
				r, err := NewAccumulator(AccumulatorConfig{Timeout: a.cfg.Timeout, Client: idle, Log: l})
				if err != nil {
					b.Fatal(err)
				}
				if n, err = r.Recover(); err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
			b.ReportMetric(float64(size), "log-bytes")
			b.ReportMetric(float64(n), "replayed-msgs")
			b.ReportMetric(float64(st.n), "logged-msgs")
		})
	}
}
