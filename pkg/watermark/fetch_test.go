package watermark_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// put is one entry put straight into a store, at clock offset heartbeat.
type put struct {
	store     int
	processor string
	partition int32
	wm        time.Duration // offset from t0
	heartbeat time.Duration // offset from t0
}

// fetchStep puts entries, moves the clock to now (offset from t0) and
// checks the fetched watermark.
type fetchStep struct {
	puts []put
	now  time.Duration
	want time.Time
}

func TestFetcher(t *testing.T) {
	none := watermark.None()
	const timeout = 10 * time.Second
	cases := []struct {
		name       string
		stores     int
		partitions []int32
		steps      []fetchStep
	}{
		{"no entries: none", 1, nil, []fetchStep{{want: none}}},
		{"minimum over processors", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}, {processor: "b", wm: 10 * time.Second}, {processor: "c", wm: 20 * time.Second}},
				want: at(10 * time.Second)},
			{puts: []put{{processor: "b", wm: 40 * time.Second}}, want: at(20 * time.Second)},
		}},
		{"minimum over partitions", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", partition: 0, wm: 30 * time.Second}, {processor: "a", partition: 1, wm: 15 * time.Second}},
				want: at(15 * time.Second)},
		}},
		{"only the partitions read", 1, []int32{0, 2}, []fetchStep{
			{puts: []put{{processor: "a", partition: 0, wm: 30 * time.Second}, {processor: "a", partition: 1, wm: 15 * time.Second},
				{processor: "b", partition: 2, wm: 25 * time.Second}},
				want: at(25 * time.Second)},
		}},
		{"minimum over the stores of every edge read", 2, nil, []fetchStep{
			{puts: []put{{store: 0, processor: "a", wm: 30 * time.Second}, {store: 1, processor: "x", wm: 12 * time.Second}},
				want: at(12 * time.Second)},
		}},
		{"monotonic: an entry put back does not move it back", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}}, want: at(30 * time.Second)},
			{puts: []put{{processor: "a", wm: 20 * time.Second}}, want: at(30 * time.Second)},
			{puts: []put{{processor: "b", wm: 5 * time.Second}}, want: at(30 * time.Second)},
			{puts: []put{{processor: "a", wm: 40 * time.Second}, {processor: "b", wm: 35 * time.Second}}, want: at(35 * time.Second)},
		}},
		{"dead processor released after its timeout", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}, {processor: "dead", wm: 10 * time.Second}}, want: at(10 * time.Second)},
			{puts: []put{{processor: "a", wm: 40 * time.Second, heartbeat: timeout}}, now: timeout, want: at(10 * time.Second)},
			{now: timeout + time.Millisecond, want: at(40 * time.Second)},
		}},
		{"a live heartbeat keeps a slow processor in", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}, {processor: "slow", wm: 10 * time.Second}}, want: at(10 * time.Second)},
			{puts: []put{{processor: "a", wm: 40 * time.Second, heartbeat: 8 * time.Second}, {processor: "slow", wm: 10 * time.Second, heartbeat: 8 * time.Second}},
				now: 15 * time.Second, want: at(10 * time.Second)},
		}},
		{"a dead processor that comes back counts again, never moving it back", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}, {processor: "b", wm: 10 * time.Second}}, want: at(10 * time.Second)},
			{puts: []put{{processor: "a", wm: 50 * time.Second, heartbeat: 20 * time.Second}}, now: 20 * time.Second, want: at(50 * time.Second)},
			{puts: []put{{processor: "b", wm: 20 * time.Second, heartbeat: 21 * time.Second}}, now: 21 * time.Second, want: at(50 * time.Second)},
			{puts: []put{{processor: "b", wm: 60 * time.Second, heartbeat: 22 * time.Second}}, now: 22 * time.Second, want: at(50 * time.Second)},
			{puts: []put{{processor: "a", wm: 70 * time.Second, heartbeat: 23 * time.Second}}, now: 23 * time.Second, want: at(60 * time.Second)},
		}},
		{"all processors dead: stays", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}}, want: at(30 * time.Second)},
			{now: time.Hour, want: at(30 * time.Second)},
		}},
		{"a processor that never published holds nothing back", 1, nil, []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * time.Second}}, want: at(30 * time.Second)},
			{puts: []put{{processor: "late", wm: 20 * time.Second}}, want: at(30 * time.Second)},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(t0)
			stores := make([]watermark.Store, c.stores)
			for i := range stores {
				stores[i] = &watermark.MemStore{}
			}
			f, err := watermark.NewFetcher(stores, c.partitions, watermark.WithClock(clk), watermark.WithTimeout(timeout))
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range c.steps {
				for _, p := range st.puts {
					e := watermark.Entry{Processor: p.processor, Partition: p.partition, Watermark: at(p.wm), Heartbeat: at(p.heartbeat)}
					if err := stores[p.store].Put(ctx, e); err != nil {
						t.Fatal(err)
					}
				}
				clk.Set(at(st.now))
				got, err := f.Watermark(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Equal(st.want) {
					t.Fatalf("step %d: watermark %s, want %s", i, got, st.want)
				}
				if last := f.Last(); !last.Equal(got) {
					t.Fatalf("step %d: Last %s, Watermark %s", i, last, got)
				}
			}
		})
	}
}

// failingStore fails every call with errStore.
type failingStore struct{ watermark.MemStore }

var errStore = errors.New("store down")

func (*failingStore) Entries(context.Context) ([]watermark.Entry, error) { return nil, errStore }

func TestFetcherErrors(t *testing.T) {
	if _, err := watermark.NewFetcher(nil, nil); !errors.Is(err, watermark.ErrNoStore) {
		t.Fatalf("NewFetcher(nil): %v, want ErrNoStore", err)
	}
	ctx := context.Background()
	clk := clock.NewManual(t0)
	good := &watermark.MemStore{}
	_ = good.Put(ctx, watermark.Entry{Processor: "a", Watermark: at(time.Second), Heartbeat: t0})
	f, _ := watermark.NewFetcher([]watermark.Store{good}, nil, watermark.WithClock(clk))
	if got, err := f.Watermark(ctx); err != nil || !got.Equal(at(time.Second)) {
		t.Fatalf("Watermark: %s, %v", got, err)
	}
	f2, _ := watermark.NewFetcher([]watermark.Store{good, &failingStore{}}, nil, watermark.WithClock(clk))
	got, err := f2.Watermark(ctx)
	if !errors.Is(err, errStore) || !watermark.IsNone(got) {
		t.Fatalf("Watermark with a failing store: %s, %v; want None and the store's error", got, err)
	}
}
