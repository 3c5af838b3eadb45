package watermark_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
)

// entries returns the store's entries sorted by processor and partition,
// each as "processor/partition wm hb" with times as offsets from t0.
func entries(t *testing.T, s watermark.Store) []string {
	t.Helper()
	es, err := s.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Processor + "/" + string(rune('0'+e.Partition)) + " " + e.Watermark.Sub(t0).String() + " " + e.Heartbeat.Sub(t0).String()
	}
	slices.Sort(out)
	return out
}

func TestPublisher(t *testing.T) {
	type pub struct {
		advance   time.Duration
		partition int32
		wm        time.Time
		heartbeat bool // call Heartbeat instead of Publish
	}
	cases := []struct {
		name string
		pubs []pub
		want []string
	}{
		{"publishes per partition", []pub{
			{partition: 0, wm: at(10 * time.Second)},
			{advance: time.Second, partition: 1, wm: at(20 * time.Second)},
		}, []string{"p/0 10s 0s", "p/1 20s 1s"}},
		{"never decreases", []pub{
			{partition: 0, wm: at(10 * time.Second)},
			{advance: time.Second, partition: 0, wm: at(5 * time.Second)},
			{advance: time.Second, partition: 0, wm: at(10 * time.Second)},
		}, []string{"p/0 10s 0s"}},
		{"none is not published", []pub{
			{partition: 0, wm: watermark.None()},
		}, []string{}},
		{"in whole milliseconds", []pub{
			{partition: 0, wm: at(1500 * time.Microsecond)},
		}, []string{"p/0 1ms 0s"}},
		{"heartbeat refreshes every partition", []pub{
			{partition: 0, wm: at(10 * time.Second)},
			{partition: 1, wm: at(20 * time.Second)},
			{advance: 5 * time.Second, heartbeat: true},
		}, []string{"p/0 10s 5s", "p/1 20s 5s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(t0)
			store := &watermark.MemStore{}
			p, err := watermark.NewPublisher(ctx, store, "p", watermark.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range c.pubs {
				clk.Advance(u.advance)
				if u.heartbeat {
					err = p.Heartbeat(ctx)
				} else {
					err = p.Publish(ctx, u.partition, u.wm, 0)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := entries(t, store); !slices.Equal(got, c.want) {
				t.Fatalf("entries %q, want %q", got, c.want)
			}
		})
	}
}

func TestPublisherRestartResumesFromStore(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	store := &watermark.MemStore{}
	p, _ := watermark.NewPublisher(ctx, store, "p-0", watermark.WithClock(clk))
	_ = p.Publish(ctx, 0, at(30*time.Second), 0)
	// The replica restarts under the same name: no Close, a new publisher.
	clk.Advance(time.Second)
	p2, err := watermark.NewPublisher(ctx, store, "p-0", watermark.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Publish(ctx, 0, at(20*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if got, want := entries(t, store), []string{"p-0/0 30s 0s"}; !slices.Equal(got, want) {
		t.Fatalf("after an older publish: %q, want %q", got, want)
	}
	_ = p2.Publish(ctx, 0, at(40*time.Second), 0)
	if got, want := entries(t, store), []string{"p-0/0 40s 1s"}; !slices.Equal(got, want) {
		t.Fatalf("after a newer publish: %q, want %q", got, want)
	}
}

func TestPublisherClose(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	store := &watermark.MemStore{}
	other, _ := watermark.NewPublisher(ctx, store, "other", watermark.WithClock(clk))
	_ = other.Publish(ctx, 0, at(time.Minute), 0)
	p, _ := watermark.NewPublisher(ctx, store, "p", watermark.WithClock(clk))
	_ = p.Publish(ctx, 0, at(time.Second), 0)
	_ = p.Publish(ctx, 1, at(time.Second), 0)
	f, _ := watermark.NewFetcher(store, 0, watermark.WithClock(clk))
	_ = f.Refresh(ctx)
	if wm := f.At(0); !wm.Equal(at(time.Second)) {
		t.Fatalf("before Close: %s", wm)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got, want := entries(t, store), []string{"other/0 1m0s 0s"}; !slices.Equal(got, want) {
		t.Fatalf("after Close: %q, want %q", got, want)
	}
	_ = f.Refresh(ctx)
	if wm := f.At(0); !wm.Equal(at(time.Minute)) {
		t.Fatalf("after Close the closed processor holds nothing back: %s", wm)
	}
	if err := p.Publish(ctx, 0, at(time.Hour), 0); !errors.Is(err, watermark.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if err := p.Heartbeat(ctx); !errors.Is(err, watermark.ErrClosed) {
		t.Fatalf("Heartbeat after Close: %v", err)
	}
}

func TestPublisherInvalidName(t *testing.T) {
	for _, name := range []string{"", ".a", "a.", "a..b", "a b", "a*", "a>"} {
		_, err := watermark.NewPublisher(context.Background(), &watermark.MemStore{}, name)
		if !errors.Is(err, watermark.ErrInvalidProcessor) {
			t.Errorf("NewPublisher(%q): %v, want ErrInvalidProcessor", name, err)
		}
	}
	for _, name := range []string{"p", "pipe-in-0", "a.b", "x_y=z/1"} {
		if !watermark.ValidProcessor(name) {
			t.Errorf("ValidProcessor(%q) = false", name)
		}
	}
}

// flakyStore fails Put while fail is set.
type flakyStore struct {
	watermark.MemStore
	mu   sync.Mutex
	fail bool
}

func (s *flakyStore) Put(ctx context.Context, e watermark.Entry) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errStore
	}
	return s.MemStore.Put(ctx, e)
}

func TestPublisherRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewManual(t0)
	store := &flakyStore{}
	errs := make(chan error, 10)
	p, _ := watermark.NewPublisher(ctx, store, "p", watermark.WithClock(clk),
		watermark.WithHeartbeatInterval(2*time.Second), watermark.WithErrorHandler(func(err error) { errs <- err }))
	_ = p.Publish(ctx, 0, at(time.Second), 0)
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	// beat moves the clock to Run's next heartbeat and returns when Run
	// waits for the one after: the heartbeat is done.
	beat := func() {
		t.Helper()
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	beat() // heartbeat at 2s
	if got, want := entries(t, &store.MemStore), []string{"p/0 1s 2s"}; !slices.Equal(got, want) {
		t.Fatalf("after one heartbeat: %q, want %q", got, want)
	}
	store.mu.Lock()
	store.fail = true
	store.mu.Unlock()
	beat() // the heartbeat at 4s fails: reported, Run goes on
	if err := <-errs; !errors.Is(err, errStore) || !strings.Contains(err.Error(), "partition 0") {
		t.Fatalf("reported error: %v", err)
	}
	store.mu.Lock()
	store.fail = false
	store.mu.Unlock()
	beat() // heartbeat at 6s stored
	if got, want := entries(t, &store.MemStore), []string{"p/0 1s 6s"}; !slices.Equal(got, want) {
		t.Fatalf("after the heartbeat at 6s: %q, want %q", got, want)
	}
	_ = p.Close(ctx)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
