package watermark_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// put is one entry put straight into the store, at clock offset heartbeat.
type put struct {
	processor string
	partition int32
	wm        time.Duration // offset from t0
	offset    int64
	heartbeat time.Duration // offset from t0
}

// fetchStep puts entries, refreshes, moves the clock to now (offset from
// t0) and checks the watermark once the reader has reached offset.
type fetchStep struct {
	puts    []put
	now     time.Duration
	reached int64
	want    time.Time
}

func TestFetcher(t *testing.T) {
	none := watermark.None()
	const timeout = 10 * time.Second
	s := time.Second
	cases := []struct {
		name  string
		steps []fetchStep
	}{
		{"no entries: none", []fetchStep{{want: none}}},
		{"minimum over processors", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}, {processor: "b", wm: 10 * s}, {processor: "c", wm: 20 * s}},
				want: at(10 * s)},
			{puts: []put{{processor: "b", wm: 40 * s}}, want: at(20 * s)},
		}},
		{"only the partition read", []fetchStep{
			{puts: []put{{processor: "a", partition: 0, wm: 30 * s}, {processor: "a", partition: 1, wm: 15 * s},
				{processor: "b", partition: 0, wm: 25 * s}},
				want: at(25 * s)},
		}},
		{"an entry counts once its offset is reached", []fetchStep{
			{puts: []put{{processor: "a", wm: 10 * s, offset: 5}}, reached: 4, want: none},
			{reached: 5, want: at(10 * s)},
			{puts: []put{{processor: "a", wm: 20 * s, offset: 9}}, reached: 8, want: at(10 * s)},
			{reached: 9, want: at(20 * s)},
		}},
		{"entries wait in order for the reader", []fetchStep{
			{puts: []put{{processor: "a", wm: 10 * s, offset: 5}}, want: none},
			{puts: []put{{processor: "a", wm: 20 * s, offset: 9}}, want: none},
			{puts: []put{{processor: "a", wm: 30 * s, offset: 12}}, reached: 6, want: at(10 * s)},
			{reached: 11, want: at(20 * s)},
			{reached: 12, want: at(30 * s)},
		}},
		{"a processor whose data is still to come holds the rest back", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s, offset: 1}, {processor: "b", wm: 40 * s, offset: 3}}, reached: 2, want: none},
			{reached: 3, want: at(30 * s)},
		}},
		{"monotonic: an entry put back does not move it back", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}}, want: at(30 * s)},
			{puts: []put{{processor: "a", wm: 20 * s}}, want: at(30 * s)},
			{puts: []put{{processor: "b", wm: 5 * s}}, want: at(30 * s)},
			{puts: []put{{processor: "a", wm: 40 * s}, {processor: "b", wm: 35 * s}}, want: at(35 * s)},
		}},
		{"dead processor released after its timeout", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}, {processor: "dead", wm: 10 * s}}, want: at(10 * s)},
			{puts: []put{{processor: "a", wm: 40 * s, heartbeat: timeout}}, now: timeout, want: at(10 * s)},
			{now: timeout + time.Millisecond, want: at(40 * s)},
		}},
		{"a dead processor whose data never came is released too", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}, {processor: "dead", wm: 10 * s, offset: 100}}, want: none},
			{puts: []put{{processor: "a", wm: 40 * s, heartbeat: timeout}}, now: timeout + time.Millisecond, want: at(40 * s)},
		}},
		{"a live heartbeat keeps a slow processor in", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}, {processor: "slow", wm: 10 * s}}, want: at(10 * s)},
			{puts: []put{{processor: "a", wm: 40 * s, heartbeat: 8 * s}, {processor: "slow", wm: 10 * s, heartbeat: 8 * s}},
				now: 15 * s, want: at(10 * s)},
		}},
		{"a dead processor that comes back counts again, never moving it back", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}, {processor: "b", wm: 10 * s}}, want: at(10 * s)},
			{puts: []put{{processor: "a", wm: 50 * s, heartbeat: 20 * s}}, now: 20 * s, want: at(50 * s)},
			{puts: []put{{processor: "b", wm: 20 * s, heartbeat: 21 * s}}, now: 21 * s, want: at(50 * s)},
			{puts: []put{{processor: "b", wm: 60 * s, heartbeat: 22 * s}}, now: 22 * s, want: at(50 * s)},
			{puts: []put{{processor: "a", wm: 70 * s, heartbeat: 23 * s}}, now: 23 * s, want: at(60 * s)},
		}},
		{"all processors dead: stays", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}}, want: at(30 * s)},
			{now: time.Hour, want: at(30 * s)},
		}},
		{"a processor that never published holds nothing back", []fetchStep{
			{puts: []put{{processor: "a", wm: 30 * s}}, want: at(30 * s)},
			{puts: []put{{processor: "late", wm: 20 * s}}, want: at(30 * s)},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(t0)
			store := &watermark.MemStore{}
			f, err := watermark.NewFetcher(store, 0, watermark.WithClock(clk), watermark.WithTimeout(timeout))
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range c.steps {
				for _, p := range st.puts {
					e := watermark.Entry{Processor: p.processor, Partition: p.partition, Watermark: at(p.wm), Offset: p.offset, Heartbeat: at(p.heartbeat)}
					if err := store.Put(ctx, e); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				clk.Set(at(st.now))
				got := f.At(st.reached)
				if !got.Equal(st.want) {
					t.Fatalf("step %d: watermark %s, want %s", i, got, st.want)
				}
				if last := f.Last(); !last.Equal(got) {
					t.Fatalf("step %d: Last %s, At %s", i, last, got)
				}
			}
		})
	}
}

// A processor that stops cleanly deletes its entries, and the next Refresh
// forgets it: it holds nothing back from then on.
func TestFetcherForgetsDeleted(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	store := &watermark.MemStore{}
	_ = store.Put(ctx, watermark.Entry{Processor: "a", Watermark: at(30 * time.Second), Heartbeat: t0})
	_ = store.Put(ctx, watermark.Entry{Processor: "b", Watermark: at(10 * time.Second), Offset: 50, Heartbeat: t0})
	f, _ := watermark.NewFetcher(store, 0, watermark.WithClock(clk))
	_ = f.Refresh(ctx)
	if got := f.At(10); !watermark.IsNone(got) {
		t.Fatalf("b's data to come: %s, want none", got)
	}
	_ = store.Delete(ctx, "b")
	_ = f.Refresh(ctx)
	if got := f.At(10); !got.Equal(at(30 * time.Second)) {
		t.Fatalf("b deleted: %s, want 30s", got.Sub(t0))
	}
}

// failingStore fails every call with errStore.
type failingStore struct{ watermark.MemStore }

var errStore = errors.New("store down")

func (*failingStore) Entries(context.Context) ([]watermark.Entry, error) { return nil, errStore }

func TestFetcherErrors(t *testing.T) {
	if _, err := watermark.NewFetcher(nil, 0); !errors.Is(err, watermark.ErrNoStore) {
		t.Fatalf("NewFetcher(nil): %v, want ErrNoStore", err)
	}
	ctx := context.Background()
	clk := clock.NewManual(t0)
	good := &watermark.MemStore{}
	_ = good.Put(ctx, watermark.Entry{Processor: "a", Watermark: at(time.Second), Heartbeat: t0})
	f, _ := watermark.NewFetcher(good, 0, watermark.WithClock(clk))
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.At(0); !got.Equal(at(time.Second)) {
		t.Fatalf("At: %s", got)
	}
	f2, _ := watermark.NewFetcher(&failingStore{}, 0, watermark.WithClock(clk))
	if err := f2.Refresh(ctx); !errors.Is(err, errStore) {
		t.Fatalf("Refresh of a failing store: %v, want the store's error", err)
	}
	if got := f2.At(0); !watermark.IsNone(got) {
		t.Fatalf("At after a failed Refresh: %s, want none", got)
	}
}
