package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// What is written is read back exactly, in order, and acking empties the
// buffer; with file and memory storage.
func TestWriteReadAckRoundTrip(t *testing.T) {
	t.Parallel()
	for _, storage := range []Storage{FileStorage, MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			t.Parallel()
			sp := spec("rt-0", 100)
			s, c := setup(t, sp, func(cfg *Config) { cfg.Storage = storage })
			sent := []isb.Message{
				{ID: "1", Keys: []string{"a", "b"}, Value: []byte("hello"), EventTime: time.Unix(1700000000, 123456789),
					Headers: map[string]string{"h1": "v1", "h2": ""}},
				{ID: "2"},
				{ID: "3", Keys: []string{""}, Value: make([]byte, 512*1024), Tags: []string{"dropped"}},
				{ID: "4", Value: []byte{0, 1, 2}, EventTime: time.Unix(0, 0)},
			}
			write(t, newWriter(t, c, sp, "up"), sent)
			if bi := info(t, c, sp.Name); bi.Messages != 4 || bi.Pending != 4 || bi.AckPending != 0 {
				t.Fatalf("after write: %+v", bi)
			}
			r := newReader(t, c, sp.Name, time.Second)
			got := readN(t, r, len(sent), 10)
			for i := range sent {
				if !sameMessage(got[i].Message, sent[i]) {
					t.Fatalf("message %d: got %+v, want %+v", i, got[i].Message, sent[i])
				}
				if got[i].Tags != nil {
					t.Fatalf("message %d: tags %v", i, got[i].Tags)
				}
				if got[i].Handle == nil {
					t.Fatalf("message %d: no handle", i)
				}
			}
			if bi := info(t, c, sp.Name); bi.Messages != 4 || bi.Pending != 0 || bi.AckPending != 4 {
				t.Fatalf("after read: %+v", bi)
			}
			ack(t, r, got)
			// Ack returns once the server has received the acks; it applies
			// them a moment later.
			waitEmpty(t, c, sp.Name)
			js, _ := jetstream.New(s.Connect(t))
			st, err := js.Stream(testCtx(t), sp.Name)
			if err != nil {
				t.Fatal(err)
			}
			if want := storage.jetstream(); st.CachedInfo().Config.Storage != want {
				t.Fatalf("storage %v, want %v", st.CachedInfo().Config.Storage, want)
			}
		})
	}
}

// The same message written twice within the duplicate window is stored once;
// the same ID from another vertex is another message.
func TestWriteDeduplicates(t *testing.T) {
	t.Parallel()
	sp := spec("dedup-0", 100)
	_, c := setup(t, sp, nil)
	a, b := newWriter(t, c, sp, "vertex-a"), newWriter(t, c, sp, "vertex-b")
	batch := messages("m", 5)
	write(t, a, batch)
	write(t, a, batch)     // a retry: all duplicates, all "written"
	write(t, a, batch[:2]) // again
	if bi := info(t, c, sp.Name); bi.Messages != 5 {
		t.Fatalf("after writing 5 messages three times: %d in the buffer", bi.Messages)
	}
	write(t, b, batch[:3])
	if bi := info(t, c, sp.Name); bi.Messages != 8 {
		t.Fatalf("after 3 with the same ids from another vertex: %d in the buffer, want 8", bi.Messages)
	}
	// Messages without an ID are never taken for duplicates.
	write(t, a, []isb.Message{{Value: []byte("x")}, {Value: []byte("x")}})
	if bi := info(t, c, sp.Name); bi.Messages != 10 {
		t.Fatalf("after 2 messages without id: %d in the buffer, want 10", bi.Messages)
	}
	got := readN(t, newReader(t, c, sp.Name, time.Second), 10, 10)
	count := map[string]int{}
	for _, m := range got {
		count[m.ID]++
	}
	want := map[string]int{"m0": 2, "m1": 2, "m2": 2, "m3": 1, "m4": 1, "": 2}
	if !maps.Equal(count, want) {
		t.Fatalf("read ids %v, want %v", count, want)
	}
}

// Soft limit: once the buffer holds MaxLength*UsageLimit/100 messages, a
// whole batch is refused with ErrBufferFull and nothing is published; after
// reads and acks drain it, writes succeed again.
func TestWriteSoftFull(t *testing.T) {
	t.Parallel()
	sp := BufferSpec{Name: "soft-0", MaxLength: 10, UsageLimit: 50} // full at 5
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("a", 3))
	write(t, w, messages("b", 3)) // 3 < 5: the whole batch goes in
	errs := make([]error, 4)
	if err := w.Write(testCtx(t), messages("c", 4), errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, isb.ErrBufferFull) {
			t.Fatalf("message %d: %v, want ErrBufferFull", i, err)
		}
	}
	if bi := info(t, c, sp.Name); bi.Messages != 6 {
		t.Fatalf("a refused batch was published: %d messages", bi.Messages)
	}

	// Another writer's messages count once the first writer refreshes.
	sp2 := BufferSpec{Name: "soft-1", MaxLength: 10, UsageLimit: 50}
	if err := c.CreateBuffer(testCtx(t), sp2); err != nil {
		t.Fatal(err)
	}
	w1, w2 := newWriter(t, c, sp2, "x"), newWriter(t, c, sp2, "y")
	write(t, w1, messages("x", 1))
	write(t, w2, messages("y", 4))
	runtest.WaitFor(t, "the first writer to see the other's messages", func() bool {
		full, err := w1.full(testCtx(t))
		return err == nil && full
	})

	// Drain the first buffer: writes succeed again after a refresh.
	r := newReader(t, c, sp.Name, time.Second)
	ack(t, r, readN(t, r, 6, 10))
	runtest.WaitFor(t, "writes to succeed after the buffer drained", func() bool {
		errs := make([]error, 2)
		if err := w.Write(testCtx(t), messages("d", 2), errs); err != nil {
			t.Fatal(err)
		}
		return errs[0] == nil && errs[1] == nil
	})
}

// A usage limit of 100: the buffer counts full only once it holds all of
// MaxLength.
func TestWriteFullAtHundred(t *testing.T) {
	t.Parallel()
	sp := BufferSpec{Name: "hundred-0", MaxLength: 10, UsageLimit: 100}
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("a", 9))
	write(t, w, messages("b", 1)) // 9 < 10: it goes in
	errs := make([]error, 1)
	if err := w.Write(testCtx(t), messages("c", 1), errs); err != nil || !errors.Is(errs[0], isb.ErrBufferFull) {
		t.Fatalf("write at 10 of 10: %v, %v; want ErrBufferFull", err, errs[0])
	}
	if bi := info(t, c, sp.Name); bi.Messages != 10 {
		t.Fatalf("%d messages, want 10", bi.Messages)
	}
}

// Hard limit: a batch that passes the soft check but overflows MaxLength
// has the overflowing messages refused with ErrBufferFull, one by one.
func TestWriteHardFull(t *testing.T) {
	t.Parallel()
	sp := BufferSpec{Name: "hard-0", MaxLength: 10, UsageLimit: 99}
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	batch := messages("m", 15)
	errs := make([]error, len(batch))
	if err := w.Write(testCtx(t), batch, errs); err != nil {
		t.Fatal(err)
	}
	var stored, full []string
	for i, err := range errs {
		switch {
		case err == nil:
			stored = append(stored, batch[i].ID)
		case errors.Is(err, isb.ErrBufferFull):
			full = append(full, batch[i].ID)
		default:
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if len(stored) != 10 || len(full) != 5 {
		t.Fatalf("stored %v, full %v", stored, full)
	}
	if bi := info(t, c, sp.Name); bi.Messages != 10 {
		t.Fatalf("%d messages, want 10", bi.Messages)
	}
	// Drain, then write the refused ones again: they were not taken for
	// duplicates.
	r := newReader(t, c, sp.Name, time.Second)
	got := readN(t, r, 10, 10)
	if fmt.Sprint(ids(got)) != fmt.Sprint(stored) {
		t.Fatalf("read %v, want %v", ids(got), stored)
	}
	ack(t, r, got)
	var retry []isb.Message
	for i, err := range errs {
		if err != nil {
			retry = append(retry, batch[i])
		}
	}
	runtest.WaitFor(t, "the writer to see the drained buffer", func() bool {
		full, err := w.full(testCtx(t))
		return err == nil && !full
	})
	write(t, w, retry)
	if got := readN(t, r, 5, 10); fmt.Sprint(ids(got)) != fmt.Sprint(full) {
		t.Fatalf("read %v, want %v", ids(got), full)
	}
}

func TestWriterClosed(t *testing.T) {
	t.Parallel()
	sp := spec("closed-0", 10)
	_, c := setup(t, sp, nil)
	w := c.Writer(sp, "up")
	write(t, w, messages("m", 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testCtx(t), messages("m", 1), make([]error, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// Values that would break the Nats-Msg-Id header are refused: a writer name
// for every write, a message id for its message only.
func TestWriteLineBreaks(t *testing.T) {
	t.Parallel()
	sp := spec("breaks-0", 10)
	_, c := setup(t, sp, nil)
	errs := make([]error, 3)
	bad := c.Writer(sp, "up\r\nNats-Expected-Stream: x")
	defer bad.Close()
	if err := bad.Write(testCtx(t), messages("m", 3), errs); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("writer name with a line break: %v", err)
	}
	w := newWriter(t, c, sp, "up")
	batch := messages("m", 3)
	batch[1].ID = "m1\nX: y"
	if err := w.Write(testCtx(t), batch, errs); err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrInvalidConfig) || errs[2] != nil {
		t.Fatalf("errs %v", errs)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if err := w.Write(ctx, messages("n", 3), errs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a done context: %v", err)
	}
	if bi := info(t, c, sp.Name); bi.Messages != 2 {
		t.Fatalf("%+v", bi)
	}
}

// Writes from several goroutines at once, of batches of several sizes, each
// get the outcomes of their own messages; alone and in frames.
func TestWriteConcurrent(t *testing.T) {
	t.Parallel()
	for _, frame := range []int{1, 4} {
		t.Run(fmt.Sprintf("frame=%d", frame), func(t *testing.T) {
			t.Parallel()
			sp := spec("concurrent-0", 10000)
			_, c := setup(t, sp, frames(frame))
			w := newWriter(t, c, sp, "up")
			var wg sync.WaitGroup
			var total atomic.Int64
			for g := range 4 {
				wg.Go(func() {
					for i := range 20 {
						batch := messages(fmt.Sprintf("g%d-%d-", g, i), 1+g*7+i%5)
						errs := make([]error, len(batch))
						if err := w.Write(testCtx(t), batch, errs); err != nil {
							t.Error(err)
							return
						}
						for j, err := range errs {
							if err != nil {
								t.Errorf("%s: %v", batch[j].ID, err)
								return
							}
						}
						total.Add(int64(len(batch)))
					}
				})
			}
			wg.Wait()
			got := readN(t, newReader(t, c, sp.Name, time.Second), int(total.Load()), 100)
			seen := map[string]bool{}
			for _, m := range got {
				seen[m.ID] = true
			}
			if int64(len(seen)) != total.Load() {
				t.Fatalf("read %d distinct messages, %d written", len(seen), total.Load())
			}
		})
	}
}

// Batches reuse their reply subjects; a batch given up on before its answers
// came retires them, so that the answers coming late are never taken for a
// later batch's.
func TestWriteLateAnswers(t *testing.T) {
	t.Parallel()
	sp := spec("late-answers-0", 100)
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("a", 3))
	write(t, w, messages("b", 5))
	if w.next != 1 {
		t.Fatalf("%d reply slots made for two batches one after the other, want 1", w.next)
	}

	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	batch := messages("c", 4)
	errs := make([]error, len(batch))
	w.mu.Lock() // no answer can be taken: onAnswer waits for w.mu
	b := w.publish(batch, errs)
	w.settle(ctx, b, errs)
	free := len(w.free)
	w.mu.Unlock()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("message %d given up on: %v", i, err)
		}
	}
	if free != 0 {
		t.Fatal("the slot of a batch given up on is free again")
	}
	write(t, w, messages("d", 4))
	if w.next != 2 {
		t.Fatalf("%d reply slots made, want 2", w.next)
	}
	// The batch given up on was stored all the same.
	runtest.WaitFor(t, "every message stored", func() bool { return info(t, c, sp.Name).Messages == 16 })
}
