package reduce

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// batchOf returns n messages of 100 bytes over keys, with event times in
// the window of a minute from second base.
func batchOf(n, keys int, base int64) []isb.Message {
	msgs := make([]isb.Message, n)
	value := make([]byte, 100)
	for i := range msgs {
		msgs[i] = isb.Message{ID: strconv.Itoa(i), Keys: []string{"key-" + strconv.Itoa(i%keys)}, Value: value,
			EventTime: time.Unix(base+int64(i%60), 0)}
	}
	return msgs
}

// BenchmarkAdd is the cost of taking a read batch of 500 messages of 100
// bytes into a keyed fixed window of a minute: in memory alone (no_store),
// and with the write-ahead log, appended and synced once per batch, on the
// test's temporary directory. The windows close every 20 batches.
func BenchmarkAdd(b *testing.B) {
	for _, withLog := range []bool{false, true} {
		name := "no_store"
		if withLog {
			name = "wal"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := window.Fixed(time.Minute)
			cfg := Config{Strategy: s, Keyed: true, Reducer: ReducerFunc(count)}
			if withLog {
				l, err := wal.Open(b.TempDir(), wal.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				cfg.Log = l
			}
			p, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				base := int64(i/20) * 60
				if _, err := p.Add(context.Background(), batchOf(500, 100, base)); err != nil {
					b.Fatal(err)
				}
				if i%20 == 19 {
					if _, err := p.Advance(ctx, time.Unix(base+60, 0)); err != nil {
						b.Fatal(err)
					}
					if err := p.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/msg")
		})
	}
}

// BenchmarkOpenWindowKeys measures the heap that 100,000 key sets in an open
// window take, one message of 100 bytes each, in memory: the bytes per key
// set, its message included.
func BenchmarkOpenWindowKeys(b *testing.B) {
	const keys = 100_000
	msgs := batchOf(keys, keys, 0)
	for i := range msgs {
		msgs[i].EventTime = time.Unix(1, 0)
		msgs[i].Value = append([]byte(nil), msgs[i].Value...) // a value of its own, as read
	}
	s, _ := window.Fixed(time.Minute)
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p, _ := New(Config{Strategy: s, Keyed: true, Reducer: ReducerFunc(count)})
		if _, err := p.Add(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey = float64(after.HeapAlloc-before.HeapAlloc) / keys
		runtime.KeepAlive(p)
	}
	b.ReportMetric(perKey, "B/key")
}

// BenchmarkOpenKeys measures the heap that 100,000 keys in one open fixed
// window take, in memory (no_store): one message a key, with an empty value
// and with a value of 100 bytes, each message's ID, key and value allocated
// as a reader hands them over. It reports the bytes per key, everything the
// processor keeps for it included, the batch slice not.
func BenchmarkOpenKeys(b *testing.B) {
	const keys = 100_000
	for _, size := range []int{0, 100} {
		b.Run("value="+strconv.Itoa(size)+"B", func(b *testing.B) {
			s, _ := window.Fixed(time.Second)
			msgs := make([]isb.Message, keys)
			var perKey float64
			for b.Loop() {
				clear(msgs)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				p, err := New(Config{Strategy: s, Keyed: true, Reducer: ReducerFunc(count)})
				if err != nil {
					b.Fatal(err)
				}
				for i := range msgs {
					msgs[i] = isb.Message{ID: "in-0-" + strconv.Itoa(1_000_000+i), Keys: []string{"key-" + strconv.Itoa(i)},
						Value: make([]byte, size), EventTime: time.Unix(1, int64(i))}
				}
				if _, err := p.Add(context.Background(), msgs); err != nil {
					b.Fatal(err)
				}
				clear(msgs) // the reader's batch, reused: the processor holds what it keeps
				runtime.GC()
				runtime.ReadMemStats(&after)
				if p.Open() == 0 {
					b.Fatal("no open window")
				}
				perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / keys
				runtime.KeepAlive(p)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}
