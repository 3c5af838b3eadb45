package reduce

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// sorter emits its key set's messages in event-time order as the watermark
// passes them by lag, as examples/streamsorter does with no lag. With no
// lag it emits nothing when its key set closes: what it emits relies on
// the heartbeats alone; with a lag it holds messages the watermark has
// passed, and emits the rest when its key set closes.
type sorter struct {
	lag time.Duration
	wm  time.Time
	buf []sdkacc.Datum
}

func (s *sorter) Accumulate(ctx context.Context, in <-chan sdkacc.Datum, out chan<- sdkacc.Message) {
	emit := func(upTo time.Time) {
		n := 0
		for _, x := range s.buf {
			if x.EventTime().After(upTo) {
				break
			}
			out <- sdkacc.MessageFromDatum(x)
			n++
		}
		s.buf = s.buf[n:]
	}
	for d := range in {
		if d.Watermark().After(s.wm) {
			s.wm = d.Watermark()
			emit(s.wm.Add(-s.lag))
		}
		i := sort.Search(len(s.buf), func(i int) bool { return s.buf[i].EventTime().After(d.EventTime()) })
		s.buf = slices.Insert(s.buf, i, d)
	}
	if s.lag > 0 {
		emit(time.Unix(1<<40, 0))
	}
}

// serveSorter starts a server of sorters with lag in a directory of its
// own and returns a client of it.
func serveSorter(t testing.TB, lag time.Duration) *accumulatorclient.Client {
	t.Helper()
	return serveAcc(t, func() sdkacc.Accumulator { return &sorter{lag: lag, wm: time.UnixMilli(-1)} })
}

// serveAcc starts a server of the accumulators fn makes in a directory of
// its own and returns a client of it.
func serveAcc(t testing.TB, fn func() sdkacc.Accumulator) *accumulatorclient.Client {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := sdkacc.NewServer(sdkacc.CreatorFunc(fn), sdkacc.WithSocketDir(dir), sdkacc.WithShutdownTimeout(time.Second))
	go func() { done <- srv.Start(ctx) }()
	c := accumulatorclient.New(dir, zap.NewNop())
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

// openLog opens the log in dir with segments of size bytes; it is closed
// at the end of the test.
func openLog(t testing.TB, dir string, size int64) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{SegmentSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newAcc makes an Accumulator with a timeout of 5s on c and l, recovered;
// it is closed at the end of the test.
func newAcc(t testing.TB, c *accumulatorclient.Client, l *wal.Log) (*Accumulator, int) {
	t.Helper()
	a, err := NewAccumulator(AccumulatorConfig{Timeout: 5 * time.Second, Client: c, Log: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	n, err := a.Recover()
	if err != nil {
		t.Fatal(err)
	}
	return a, n
}

// accAdvance moves a's watermark to wm and collects what the functions emit
// until there are want outputs: it drains again (Advance at the same
// watermark) each time a response comes, for at most 10 seconds.
func accAdvance(t testing.TB, a *Accumulator, wm time.Time, want int) []isb.Message {
	t.Helper()
	ctx := context.Background()
	out, err := a.Advance(ctx, wm)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for len(out) < want {
		select {
		case <-a.received:
		case <-deadline.C:
			t.Fatalf("at watermark %v: %d outputs of %d after 10s", wm.UnixMilli(), len(out), want)
		}
		res, err := a.Advance(ctx, wm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
	}
	if len(out) > want {
		t.Fatalf("at watermark %v: %d outputs, want %d", wm.UnixMilli(), len(out), want)
	}
	return out
}

func accCommit(t testing.TB, a *Accumulator) {
	t.Helper()
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
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

// model is what a run of the sorter with no lag must emit: the messages
// added and not yet emitted, by ID.
type model map[string]isb.Message

// release returns how many of the messages not yet emitted are before wm,
// and forgets them.
func (md model) release(wm time.Time) int {
	n := 0
	for id, m := range md {
		if m.EventTime.Before(wm) {
			delete(md, id)
			n++
		}
	}
	return n
}

// runAcc adds msgs in batches of 6, advancing the watermark after each to
// the earliest event time still to come and committing, and returns what
// is emitted and the watermark. md holds what is added and not emitted.
func runAcc(t *testing.T, a *Accumulator, md model, msgs []isb.Message, wm time.Time) ([]isb.Message, time.Time) {
	t.Helper()
	var out []isb.Message
	for len(msgs) > 0 {
		n := min(6, len(msgs))
		if _, err := a.Add(context.Background(), msgs[:n]); err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs[:n] {
			md[m.ID] = m
		}
		msgs = msgs[n:]
		if len(msgs) > 0 {
			low := msgs[0].EventTime
			for _, m := range msgs {
				if m.EventTime.Before(low) {
					low = m.EventTime
				}
			}
			if low.After(wm) {
				wm = low
			}
			out = append(out, accAdvance(t, a, wm, md.release(wm))...)
			accCommit(t, a)
		}
	}
	return out, wm
}

// finish advances to end, which closes every key set, and collects want
// outputs and the EOFs, for at most 10 seconds.
func finish(t *testing.T, a *Accumulator, end time.Time, want int) []isb.Message {
	t.Helper()
	out := accAdvance(t, a, end, want)
	accCommit(t, a)
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for a.Open() > 0 || len(a.closing) > 0 || len(a.undone) > 0 {
		select {
		case <-a.received:
		case <-deadline.C:
			t.Fatalf("key sets still open: %d, closing %d, messages %d", a.Open(), len(a.closing), len(a.undone))
		}
		res, err := a.Advance(context.Background(), end)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
		accCommit(t, a)
	}
	return out
}

// checkSorted checks that out has each message of accInput once by ID and
// each key's in event-time order.
func checkSorted(t *testing.T, out []isb.Message) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]time.Time{}
	for _, m := range out {
		seen[m.ID]++
		k := m.Keys[0]
		if m.EventTime.Before(last[k]) {
			t.Errorf("key %s: %s at %v after %v", k, m.ID, m.EventTime.Unix(), last[k].Unix())
		}
		last[k] = m.EventTime
	}
	for _, m := range accInput() {
		if n := seen[m.ID]; n != 1 {
			t.Errorf("%s emitted %d times", m.ID, n)
		}
	}
	if len(seen) != len(accInput()) {
		t.Errorf("%d distinct IDs, want %d", len(seen), len(accInput()))
	}
}

func TestAccumulatorSorts(t *testing.T) {
	c := serveSorter(t, 0)
	for _, logged := range []bool{false, true} {
		t.Run(fmt.Sprintf("log=%v", logged), func(t *testing.T) {
			var l *wal.Log
			if logged {
				l = openLog(t, t.TempDir(), 512)
			}
			a, _ := newAcc(t, c, l)
			md := model{}
			out, _ := runAcc(t, a, md, accInput(), time.Time{})
			out = append(out, finish(t, a, time.Unix(100, 0), md.release(time.Unix(100, 0)))...)
			checkSorted(t, out)
			if logged {
				if segs := l.Segments(); len(segs) > 1 {
					t.Errorf("%d segments left after every key set closed", len(segs))
				}
			}
		})
	}
}

// TestAccumulatorCrash stops an Accumulator mid-run without a word (what
// kill -9 leaves: the log as synced, an unfinished stream), restarts it on
// the same log, and gets every message out exactly once, each key's in
// order: what was emitted and committed before the crash is not fed again.
func TestAccumulatorCrash(t *testing.T) {
	c := serveSorter(t, 0)
	dir := filepath.Join(t.TempDir(), "log")
	msgs := accInput()
	a1, _ := newAcc(t, c, openLog(t, dir, 512))
	md := model{}
	before, wm := runAcc(t, a1, md, msgs[:30], time.Time{})
	if _, err := a1.Add(context.Background(), msgs[30:36]); err != nil { // logged, never committed nor acked
		t.Fatal(err)
	}
	a1.Close()
	a1.cfg.Log.Close()

	a2, n := newAcc(t, c, openLog(t, dir, 512))
	if n != len(md)+6 || a2.InDoubt() != 0 {
		t.Fatalf("recovered %d messages, %d in doubt; want %d, 0", n, a2.InDoubt(), len(md)+6)
	}
	after, _ := runAcc(t, a2, md, msgs[30:], wm) // 30..35 delivered again: dropped as held
	after = append(after, finish(t, a2, time.Unix(100, 0), md.release(time.Unix(100, 0)))...)
	checkSorted(t, append(before, after...))
	if strings.Contains(fmt.Sprint(after), HeartbeatPrefix) {
		t.Errorf("a heartbeat came out: %v", after)
	}
}
