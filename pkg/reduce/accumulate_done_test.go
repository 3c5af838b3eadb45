package reduce

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/wal"
	sdkacc "github.com/sluiceflow/sluice/pkg/sdk/accumulator"
	"github.com/sluiceflow/sluice/pkg/udf/accumulatorclient"
)

// stream is one always-active key's messages, made as a manual clock
// moves a second at a time: each second's messages have event times in
// the second before the clock, spread evenly and read in reverse order.
type stream struct {
	clk   *clock.Manual
	key   string
	rate  int // messages a second
	n     int
	value []byte
}

func newStream(key string, rate, size int) *stream {
	return &stream{clk: clock.NewManual(time.Unix(1000, 0)), key: key, rate: rate, value: make([]byte, size)}
}

// next moves the clock a second and returns that second's messages.
func (s *stream) next() []isb.Message {
	s.clk.Advance(time.Second)
	now := s.clk.Now()
	msgs := make([]isb.Message, s.rate)
	for i := range msgs {
		et := now.Add(-time.Second + time.Duration(s.rate-1-i)*time.Second/time.Duration(s.rate))
		s.n++
		msgs[i] = isb.Message{ID: fmt.Sprintf("%s-%d", s.key, s.n), Keys: []string{s.key}, Value: s.value, EventTime: et}
	}
	return msgs
}

// watermark is the watermark after next: the second before the clock is
// still being read.
func (s *stream) watermark() time.Time { return s.clk.Now().Add(-time.Second) }

func accAdd(t testing.TB, a *Accumulator, msgs []isb.Message) int {
	t.Helper()
	late, err := a.Add(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	return late
}

// ids returns the sorted IDs of msgs.
func ids(msgs []isb.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

// undoneIDs returns the sorted IDs of the messages a holds or has fed and
// not yet seen done.
func undoneIDs(a *Accumulator) []string { return slices.Sorted(maps.Keys(a.undone)) }

// checkReplay opens the log in dir as a restart would, and checks that it
// brings back exactly the messages want, none in doubt.
func checkReplay(t *testing.T, c *accumulatorclient.Client, dir string, want []string, inDoubt int) {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, n := newAcc(t, c, l)
	if got := undoneIDs(a); n != len(want) || !slices.Equal(got, want) || a.InDoubt() != inDoubt {
		t.Fatalf("replay: %d messages %v, %d in doubt; want %v, %d in doubt", n, got, a.InDoubt(), want, inDoubt)
	}
}

// TestAccumulatorDoneMarks runs an always-active key through sorters that
// emit what the watermark has passed, by no lag and by 3s, and checks after
// every commit that the Accumulator keeps, and the log brings back, exactly
// the messages not yet emitted: those held for the watermark and those the
// function holds.
func TestAccumulatorDoneMarks(t *testing.T) {
	for _, lag := range []time.Duration{0, 3 * time.Second} {
		t.Run(fmt.Sprintf("lag=%s", lag), func(t *testing.T) {
			c := serveSorter(t, lag)
			dir := t.TempDir()
			a, _ := newAcc(t, c, openLog(t, dir, 4096))
			st := newStream("k", 10, 20)
			left := map[string]isb.Message{} // not yet emitted
			for cycle := range 12 {
				msgs := st.next()
				accAdd(t, a, msgs)
				for _, m := range msgs {
					left[m.ID] = m
				}
				wm := st.watermark()
				var want []isb.Message
				for id, m := range left {
					if m.EventTime.Before(wm) && !m.EventTime.After(wm.Add(-lag)) {
						want = append(want, m)
						delete(left, id)
					}
				}
				out := accAdvance(t, a, wm, len(want))
				if !slices.Equal(ids(out), ids(want)) {
					t.Fatalf("cycle %d: emitted %v, want %v", cycle, ids(out), ids(want))
				}
				accCommit(t, a)
				notDone := slices.Sorted(maps.Keys(left))
				if got := undoneIDs(a); !slices.Equal(got, notDone) {
					t.Fatalf("cycle %d: keeps %v, want %v", cycle, got, notDone)
				}
				checkReplay(t, c, dir, notDone, 0)
			}
		})
	}
}

// renamer emits each message at once under a new ID, and nothing for a
// heartbeat: only its outputs' watermarks say what is done.
type renamer struct{}

func (renamer) Accumulate(_ context.Context, in <-chan sdkacc.Datum, out chan<- sdkacc.Message) {
	for d := range in {
		if !strings.HasPrefix(d.ID(), HeartbeatPrefix) {
			out <- sdkacc.MessageFromDatum(d).WithID("out-" + d.ID())
		}
	}
}

// TestAccumulatorDoneByWatermark checks Numaflow's rule for outputs that
// keep no input's ID: the messages before the latest watermark a key set's
// outputs carry are done. Those fed in a cycle carry the watermark before
// it, so the ones fed last stay, emitted and not done, and come back after a
// restart (at least once).
func TestAccumulatorDoneByWatermark(t *testing.T) {
	c := serveAcc(t, func() sdkacc.Accumulator { return renamer{} })
	dir := t.TempDir()
	a, _ := newAcc(t, c, openLog(t, dir, 4096))
	st := newStream("k", 5, 20)
	var all []isb.Message
	prev := time.Time{}
	for cycle := range 6 {
		msgs := st.next()
		accAdd(t, a, msgs)
		all = append(all, msgs...)
		wm := st.watermark()
		fed := 0
		for _, m := range all {
			if !m.EventTime.Before(prev) && m.EventTime.Before(wm) {
				fed++
			}
		}
		accAdvance(t, a, wm, fed)
		accCommit(t, a)
		var notDone []string // fed this cycle, or held
		for _, m := range all {
			if cycle == 0 || !m.EventTime.Before(prev) {
				notDone = append(notDone, m.ID)
			}
		}
		slices.Sort(notDone)
		if got := undoneIDs(a); !slices.Equal(got, notDone) {
			t.Fatalf("cycle %d: keeps %v, want %v", cycle, got, notDone)
		}
		checkReplay(t, c, dir, notDone, 0)
		prev = wm
	}
}

// TestAccumulatorSegmentsRemoved runs an always-active key for 100 seconds
// on segments of 2 KiB: after every commit the oldest segment holds a
// message not done (or is the only one), so the log stays at a few
// segments while thirty times that is written.
func TestAccumulatorSegmentsRemoved(t *testing.T) {
	c := serveSorter(t, 0)
	l := openLog(t, t.TempDir(), 2048)
	a, _ := newAcc(t, c, l)
	st := newStream("k", 10, 100)
	var written, most int64
	var prev []isb.Message
	for cycle := range 100 {
		msgs := st.next()
		accAdd(t, a, msgs)
		for _, m := range msgs {
			written += int64(len(appendMessageBody(nil, &m)))
		}
		accAdvance(t, a, st.watermark(), len(prev))
		accCommit(t, a)
		prev = msgs
		segs := l.Segments()
		if len(segs) > 1 && a.segUndone[segs[0].ID] == 0 {
			t.Fatalf("cycle %d: segment %d holds no message not done and is kept", cycle, segs[0].ID)
		}
		var size int64
		for _, s := range segs {
			size += s.Size
		}
		most = max(most, size)
	}
	if segs := l.Segments(); len(segs) > 3 || most > 3*2048+1024 || written < 10*most {
		t.Errorf("%d segments %v at the end, at most %d bytes, %d bytes of messages written", len(segs), segs, most, written)
	}
}

// TestAccumulatorInDoubt stops an Accumulator between writing its done
// marks (Advance) and confirming them (Commit): the restart counts those
// messages in doubt and feeds them again, so their outputs come out once
// more; a stop after Commit leaves nothing in doubt.
func TestAccumulatorInDoubt(t *testing.T) {
	c := serveSorter(t, 0)
	dir := filepath.Join(t.TempDir(), "log")
	a1, _ := newAcc(t, c, openLog(t, dir, 4096))
	st := newStream("k", 5, 20)
	var prev []isb.Message
	for range 3 {
		msgs := st.next()
		accAdd(t, a1, msgs)
		accAdvance(t, a1, st.watermark(), len(prev))
		accCommit(t, a1)
		prev = msgs
	}
	msgs := st.next()
	accAdd(t, a1, msgs)
	out := accAdvance(t, a1, st.watermark(), len(prev)) // written downstream, say, and not committed
	a1.Close()
	a1.cfg.Log.Close()

	a2, n := newAcc(t, c, openLog(t, dir, 4096))
	if n != 10 || a2.InDoubt() != 5 {
		t.Fatalf("recovered %d messages, %d in doubt; want 10, 5", n, a2.InDoubt())
	}
	next := st.next()
	accAdd(t, a2, next)
	again := accAdvance(t, a2, st.watermark(), 10)
	if want := ids(append(out, msgs...)); !slices.Equal(ids(again), want) {
		t.Fatalf("after the restart: %v, want %v", ids(again), want)
	}
	accCommit(t, a2)
	a2.Close()
	a2.cfg.Log.Close()
	checkReplay(t, c, dir, ids(next), 0)
}

// TestAccumulatorRedelivered restarts an Accumulator and has the buffer
// deliver again a message done before the crash, which is late, and one
// still held, which is dropped as held: neither is fed twice.
func TestAccumulatorRedelivered(t *testing.T) {
	c := serveSorter(t, 0)
	dir := t.TempDir()
	a1, _ := newAcc(t, c, openLog(t, dir, 4096))
	st := newStream("k", 5, 20)
	first := st.next()
	accAdd(t, a1, first)
	accAdvance(t, a1, st.watermark(), 0)
	accCommit(t, a1)
	second := st.next()
	accAdd(t, a1, second)
	accAdvance(t, a1, st.watermark(), 5)
	accCommit(t, a1)
	a1.Close()
	a1.cfg.Log.Close()

	a2, n := newAcc(t, c, openLog(t, dir, 4096))
	if n != 5 {
		t.Fatalf("recovered %d messages, want 5", n)
	}
	if late := accAdd(t, a2, []isb.Message{first[0], second[0]}); late != 1 || len(a2.undone) != 5 {
		t.Errorf("delivered again: %d late, %d kept; want 1 late, 5 kept", late, len(a2.undone))
	}
}

// TestAccumulatorRecoverRecords replays logs written record by record.
func TestAccumulatorRecoverRecords(t *testing.T) {
	msg := func(seq uint64, key string, et int64) []byte {
		m := isb.Message{ID: fmt.Sprintf("%s%d", key, seq), Keys: []string{key}, EventTime: time.Unix(et, 0)}
		return appendMessageBody(appendUvarint([]byte{recAccumulated}, seq), &m)
	}
	done := func(batch uint64, key string, et int64, seq uint64) []byte {
		return appendDone(nil, batch, []string{key}, time.Unix(et, 0), seq)
	}
	confirm := func(batch uint64) []byte { return appendUvarint([]byte{recConfirmed}, batch) }
	closed := func(key string, upTo uint64) []byte { return appendClosed(nil, []string{key}, upTo) }
	for _, tc := range []struct {
		name    string
		recs    [][]byte
		back    []string
		inDoubt int
		batch   uint64
	}{
		{"confirmed", [][]byte{msg(1, "k", 1), msg(2, "k", 2), done(1, "k", 1, 1), confirm(1)}, []string{"k2"}, 0, 1},
		{"not confirmed", [][]byte{msg(1, "k", 1), msg(2, "k", 2), done(1, "k", 1, 1)}, []string{"k1", "k2"}, 1, 1},
		{"a later batch confirmed", [][]byte{msg(1, "k", 1), msg(2, "j", 2), done(1, "k", 1, 1),
			done(2, "j", 2, 2), confirm(2)}, []string{"k1"}, 0, 2},
		{"ties by sequence", [][]byte{msg(1, "k", 5), msg(2, "k", 5), msg(3, "k", 5), done(1, "k", 5, 2), confirm(1)},
			[]string{"k3"}, 0, 1},
		{"event time first", [][]byte{msg(1, "k", 9), msg(2, "k", 3), done(1, "k", 3, 2), confirm(1)}, []string{"k1"}, 0, 1},
		{"all done", [][]byte{msg(1, "k", 1), done(1, "k", 1, 1), confirm(1), msg(2, "j", 4)}, []string{"j2"}, 0, 1},
		{"closed", [][]byte{msg(1, "k", 1), closed("k", 1), msg(2, "k", 7)}, []string{"k2"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, 0)
			if err := l.Replay(func(uint64, []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.recs {
				if _, err := l.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			a, n := newAcc(t, accumulatorclient.New(t.TempDir(), zap.NewNop()), openLog(t, dir, 0))
			if got := undoneIDs(a); n != len(tc.back) || !slices.Equal(got, tc.back) || a.InDoubt() != tc.inDoubt || a.batch != tc.batch {
				t.Errorf("back %v (%d), %d in doubt, batch %d; want %v, %d in doubt, batch %d",
					got, n, a.InDoubt(), a.batch, tc.back, tc.inDoubt, tc.batch)
			}
		})
	}
}
