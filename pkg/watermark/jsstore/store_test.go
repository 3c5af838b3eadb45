package jsstore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/watermark"
	"github.com/sluiceflow/sluice/pkg/watermark/jsstore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open connects to s and opens the bucket WM in it.
func open(t *testing.T, s *natstest.Server) (*jsstore.Store, jetstream.JetStream) {
	t.Helper()
	return openTB(t, s)
}

// openB is open for a benchmark.
func openB(b *testing.B, s *natstest.Server) *jsstore.Store {
	b.Helper()
	st, _ := openTB(b, s)
	return st
}

func openTB(tb testing.TB, s *natstest.Server) (*jsstore.Store, jetstream.JetStream) {
	tb.Helper()
	js, err := jetstream.New(s.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := jsstore.Open(ctx, js, jsstore.Config{Bucket: "WM"})
	if err != nil {
		tb.Fatal(err)
	}
	return st, js
}

// sorted returns the entries sorted by processor and partition.
func sorted(t *testing.T, st watermark.Store) []watermark.Entry {
	t.Helper()
	es, err := st.Entries(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(es, func(a, b watermark.Entry) int {
		if a.Processor != b.Processor {
			if a.Processor < b.Processor {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return es
}

func equal(a, b []watermark.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y watermark.Entry) bool {
		return x.Processor == y.Processor && x.Partition == y.Partition &&
			x.Watermark.Equal(y.Watermark) && x.Heartbeat.Equal(y.Heartbeat) && x.Offset == y.Offset
	})
}

func TestStore(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	st, _ := open(t, s)
	ctx := testCtx(t)

	if es := sorted(t, st); len(es) != 0 {
		t.Fatalf("empty bucket: %v", es)
	}
	e := func(p string, part int32, wm, hb time.Duration) watermark.Entry {
		return watermark.Entry{Processor: p, Partition: part, Watermark: at(wm), Heartbeat: at(hb)}
	}
	puts := []watermark.Entry{
		e("in-0", 0, time.Second, 0),
		e("in-0", 1, 2*time.Second, 0),
		e("in.1", 0, 3*time.Second, 0), // a dot in the name
		{Processor: "in-0", Partition: 0, Watermark: at(4 * time.Second), Heartbeat: at(time.Second), Offset: 1<<40 + 7},
		{Processor: "neg", Partition: 2, Watermark: time.UnixMilli(-5).UTC(), Heartbeat: at(0)}, // before the epoch
	}
	for _, p := range puts {
		if err := st.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	want := []watermark.Entry{puts[3], puts[1], puts[2], puts[4]}
	if got := sorted(t, st); !equal(got, want) {
		t.Fatalf("entries\n got %v\nwant %v", got, want)
	}
	if err := st.Delete(ctx, "in-0"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "nobody"); err != nil {
		t.Fatalf("Delete of a processor with no keys: %v", err)
	}
	if got := sorted(t, st); !equal(got, []watermark.Entry{puts[2], puts[4]}) {
		t.Fatalf("after Delete(in-0): %v", got)
	}
	if err := st.Put(ctx, e("a b", 0, 0, 0)); !errors.Is(err, watermark.ErrInvalidProcessor) {
		t.Fatalf("Put of an invalid name: %v", err)
	}
}

func TestOpenWithoutBucket(t *testing.T) {
	if _, err := jsstore.Open(testCtx(t), nil, jsstore.Config{}); !errors.Is(err, jsstore.ErrNoBucket) {
		t.Fatalf("Open: %v, want ErrNoBucket", err)
	}
}

func TestStoreMalformed(t *testing.T) {
	cases := []struct{ key, value string }{
		{"nopartition", "0123456789abcdef"},
		{"p.x", "0123456789abcdef"},
		{"p.0", "short"},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			s := natstest.Start(t, natstest.Options{})
			st, js := open(t, s)
			kv, err := js.KeyValue(testCtx(t), "WM")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(testCtx(t), c.key, []byte(c.value)); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Entries(testCtx(t)); !errors.Is(err, jsstore.ErrMalformed) {
				t.Fatalf("Entries: %v, want ErrMalformed", err)
			}
		})
	}
}

// TestOnJetStream runs two source replicas' publishers and a vertex's
// fetcher over one bucket: the minimum, a dead replica released after its
// timeout, a clean Close, and a restart of the server and of every process
// that resumes from the bucket and never goes back.
func TestOnJetStream(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	st, _ := open(t, s)
	ctx := testCtx(t)
	clk := clock.NewManual(t0)
	const timeout = 10 * time.Second

	pub := func(st watermark.Store, name string) *watermark.Publisher {
		t.Helper()
		p, err := watermark.NewPublisher(ctx, st, name, watermark.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fetch := func(f *watermark.Fetcher, want time.Time) {
		t.Helper()
		if err := f.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got := f.At(math.MaxInt64); !got.Equal(want) {
			t.Fatalf("at %s: watermark %s, want %s", clk.Now().Sub(t0), f.Last().Sub(t0), want.Sub(t0))
		}
	}
	a, b := pub(st, "in-0"), pub(st, "in-1")
	f, err := watermark.NewFetcher(st, 0, watermark.WithClock(clk), watermark.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	fetch(f, watermark.None())
	_ = a.Publish(ctx, 0, at(30*time.Second), 0)
	fetch(f, at(30*time.Second)) // b has not published: holds nothing back
	_ = b.Publish(ctx, 0, at(20*time.Second), 0)
	_ = b.Publish(ctx, 1, at(time.Second), 0) // a partition the vertex does not read
	fetch(f, at(30*time.Second))              // never back
	_ = a.Publish(ctx, 0, at(40*time.Second), 0)
	fetch(f, at(30*time.Second)) // b holds the minimum at 20s; the vertex stays at 30s
	_ = b.Publish(ctx, 0, at(35*time.Second), 0)
	fetch(f, at(35*time.Second))
	_ = a.Publish(ctx, 0, at(50*time.Second), 0)
	_ = b.Publish(ctx, 0, at(45*time.Second), 0)
	fetch(f, at(45*time.Second)) // the minimum

	// b dies: a keeps heartbeating and advancing; b's 45s holds until the timeout.
	_ = a.Publish(ctx, 0, at(60*time.Second), 0)
	clk.Advance(timeout)
	_ = a.Heartbeat(ctx)
	fetch(f, at(45*time.Second))
	clk.Advance(time.Millisecond)
	fetch(f, at(60*time.Second))

	// a closes cleanly: its keys go at once.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sorted(t, st); len(got) != 2 || got[0].Processor != "in-1" {
		t.Fatalf("after a's Close: %v", got)
	}

	// The server restarts; the replicas and the vertex restart with it.
	c := pub(st, "in-2")
	_ = c.Publish(ctx, 0, at(70*time.Second), 0)
	s.Restart(t)
	st2, _ := open(t, s)
	c2 := pub(st2, "in-2")
	_ = c2.Publish(ctx, 0, at(65*time.Second), 0) // older than what the bucket holds: not stored
	f2, _ := watermark.NewFetcher(st2, 0, watermark.WithClock(clk), watermark.WithTimeout(timeout))
	fetch(f2, at(70*time.Second))
	_ = c2.Publish(ctx, 0, at(80*time.Second), 0)
	fetch(f2, at(80*time.Second))
}
