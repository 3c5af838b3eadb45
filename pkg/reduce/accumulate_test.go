package reduce

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	udfacc "github.com/sluiceflow/sluice/pkg/udf/accumulator"
	"github.com/sluiceflow/sluice/pkg/wal"
)

// sorter emits its key set's messages in event-time order as the watermark
// passes them, as examples/streamsorter does, but without emitting the rest
// when its key set closes: what it emits relies on the heartbeats alone.
type sorter struct {
	wm  time.Time
	buf []sdkacc.Datum
}

func (s *sorter) Accumulate(ctx context.Context, in <-chan sdkacc.Datum, out chan<- sdkacc.Message) {
	for d := range in {
		if d.Watermark().After(s.wm) {
			s.wm = d.Watermark()
			n := 0
			for _, x := range s.buf {
				if x.EventTime().After(s.wm) {
					break
				}
				out <- sdkacc.MessageFromDatum(x)
				n++
			}
			s.buf = s.buf[n:]
		}
		i := sort.Search(len(s.buf), func(i int) bool { return s.buf[i].EventTime().After(d.EventTime()) })
		s.buf = slices.Insert(s.buf, i, d)
	}
}

// serveSorter starts a sorter server in a directory of its own and returns
// a client of it.
func serveSorter(t *testing.T) *udfacc.Client {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := sdkacc.NewServer(sdkacc.CreatorFunc(func() sdkacc.Accumulator { return &sorter{wm: time.UnixMilli(-1)} }),
		sdkacc.WithSocketDir(dir), sdkacc.WithShutdownTimeout(time.Second))
	go func() { done <- srv.Start(ctx) }()
	c := udfacc.New(dir, zap.NewNop())
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if err := c.Connect(cctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// accInput is 3 keys' messages, 20 each, in an order that is not their
// event time's: message i of key k has event time (i*7 mod 20) seconds.
func accInput() []isb.Message {
	var msgs []isb.Message
	for i := range 20 {
		for _, k := range []string{"a", "b", "c"} {
			et := time.Unix(int64(i*7%20), 0)
			msgs = append(msgs, isb.Message{ID: fmt.Sprintf("%s-%d", k, i), Keys: []string{k},
				Value: []byte(fmt.Sprint(et.Unix())), EventTime: et})
		}
	}
	return msgs
}

// runAcc adds msgs in batches of 6, advancing the watermark after each to
// the earliest event time still to come, and returns what is emitted and
// the watermark.
func runAcc(t *testing.T, a *Accumulator, msgs []isb.Message, wm time.Time) ([]isb.Message, time.Time) {
	t.Helper()
	ctx := context.Background()
	var out []isb.Message
	step := func(w time.Time) {
		if w.After(wm) {
			wm = w
		}
		res, err := a.Advance(ctx, wm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
		if err := a.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for len(msgs) > 0 {
		n := min(6, len(msgs))
		if _, err := a.Add(context.Background(), msgs[:n]); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[n:]
		if len(msgs) > 0 {
			low := msgs[0].EventTime
			for _, m := range msgs {
				if m.EventTime.Before(low) {
					low = m.EventTime
				}
			}
			step(low)
		}
	}
	return out, wm
}

// finish advances to end and collects until every key set has closed.
func finish(t *testing.T, a *Accumulator, end time.Time) []isb.Message {
	t.Helper()
	var out []isb.Message
	deadline := time.Now().Add(10 * time.Second)
	for wm := end; ; wm = wm.Add(time.Millisecond) {
		res, err := a.Advance(context.Background(), wm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
		if err := a.Commit(); err != nil {
			t.Fatal(err)
		}
		if a.Open() == 0 && len(a.closing) == 0 && len(a.live) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("key sets still open: %d, closing %d", a.Open(), len(a.closing))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkSorted checks that out has each message of accInput once by ID
// (allowing repeats when dups) and each key's in event-time order.
func checkSorted(t *testing.T, out []isb.Message, dups bool) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]time.Time{}
	for _, m := range out {
		seen[m.ID]++
		k := m.Keys[0]
		if m.EventTime.Before(last[k]) && !dups {
			t.Errorf("key %s: %s at %v after %v", k, m.ID, m.EventTime.Unix(), last[k].Unix())
		}
		last[k] = m.EventTime
	}
	for _, m := range accInput() {
		if n := seen[m.ID]; n == 0 || (n > 1 && !dups) {
			t.Errorf("%s emitted %d times", m.ID, n)
		}
	}
	if len(seen) != len(accInput()) {
		t.Errorf("%d distinct IDs, want %d", len(seen), len(accInput()))
	}
}

func TestAccumulatorSorts(t *testing.T) {
	c := serveSorter(t)
	for _, logged := range []bool{false, true} {
		t.Run(fmt.Sprintf("log=%v", logged), func(t *testing.T) {
			cfg := AccumulatorConfig{Timeout: 5 * time.Second, Client: c}
			if logged {
				l, err := wal.Open(t.TempDir(), wal.Options{SegmentSize: 512})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				cfg.Log = l
			}
			a, err := NewAccumulator(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if _, err := a.Recover(); err != nil {
				t.Fatal(err)
			}
			out, _ := runAcc(t, a, accInput(), time.Time{})
			out = append(out, finish(t, a, time.Unix(100, 0))...)
			checkSorted(t, out, false)
			if logged {
				if segs := cfg.Log.Segments(); len(segs) > 1 {
					t.Errorf("%d segments left after every key set closed", len(segs))
				}
			}
		})
	}
}

// TestAccumulatorCrash stops an Accumulator mid-run without a word (what
// kill -9 leaves: the log as synced, an unfinished stream), restarts it on
// the same log, and gets every message out, each key's in order after the
// restart.
func TestAccumulatorCrash(t *testing.T) {
	c := serveSorter(t)
	dir := filepath.Join(t.TempDir(), "log")
	msgs := accInput()
	l1, err := wal.Open(dir, wal.Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	a1, err := NewAccumulator(AccumulatorConfig{Timeout: 5 * time.Second, Client: c, Log: l1})
	if err != nil {
		t.Fatal(err)
	}
	before, wm := runAcc(t, a1, msgs[:30], time.Time{})
	if _, err := a1.Add(context.Background(), msgs[30:36]); err != nil { // logged, never committed nor acked
		t.Fatal(err)
	}
	a1.Close()

	l2, err := wal.Open(dir, wal.Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	a2, err := NewAccumulator(AccumulatorConfig{Timeout: 5 * time.Second, Client: c, Log: l2})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	n, err := a2.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("nothing recovered")
	}
	after, _ := runAcc(t, a2, msgs[30:], wm) // 30..35 delivered again: dropped as held
	after = append(after, finish(t, a2, time.Unix(100, 0))...)
	checkSorted(t, after, false)
	checkSorted(t, append(before, after...), true)
}
