package jetstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Read returns at most len(buf) messages and asks the server for no more,
// except that a Read of its largest buf that fills it fetches one more batch
// of that size ahead: a trimmed Read (as by a rate limiter's grant) takes
// no more than it was given, and nothing is read twice.
func TestReadTakesNoMoreThanBuf(t *testing.T) {
	t.Parallel()
	sp := spec("limit-0", 100)
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	r := newReader(t, c, sp.Name, 5*time.Second)
	write(t, w, messages("m", 30))
	buf := make([]isb.ReadMessage, 10)
	n, err := r.Read(testCtx(t), buf)
	if err != nil || n != 10 {
		t.Fatalf("Read(10) = %d, %v", n, err)
	}
	first := slices.Clone(buf[:n])
	// The next 10 are fetched ahead.
	runtest.WaitFor(t, "the batch fetched ahead", func() bool { bi := info(t, c, sp.Name); return bi.AckPending == 20 && bi.Pending == 10 })
	n, err = r.Read(testCtx(t), buf[:3])
	if err != nil || n != 3 {
		t.Fatalf("Read(3) = %d, %v", n, err)
	}
	got := append(first, buf[:n]...)
	if bi := info(t, c, sp.Name); bi.AckPending != 20 || bi.Pending != 10 {
		t.Fatalf("after a trimmed Read(3): %+v", bi)
	}
	ack(t, r, got)
	runtest.WaitFor(t, "acks applied", func() bool { return info(t, c, sp.Name).Messages == 17 })
	rest := readN(t, r, 17, 10)
	ack(t, r, rest)
	if all := ids(append(got, rest...)); len(all) != 30 || len(slices.Compact(slices.Sorted(slices.Values(all)))) != 30 {
		t.Fatalf("read %v", all)
	}
	waitEmpty(t, c, sp.Name)

	// Empty buffer: Read waits for the first message, then takes what else
	// is there, up to len(buf).
	done := make(chan int)
	go func() {
		n, err := r.Read(testCtx(t), buf[:5])
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	runtest.WaitFor(t, "the waiting fetch", func() bool { return consumerWaiting(t, c, sp.Name) > 0 })
	write(t, w, messages("n", 12))
	n = <-done
	if n < 1 || n > 5 {
		t.Fatalf("Read(5) after waiting = %d", n)
	}
	if bi := info(t, c, sp.Name); bi.AckPending != n || int(bi.Pending) != 12-n {
		t.Fatalf("after Read(5) = %d: %+v", n, bi)
	}
	if n, err := r.Read(testCtx(t), buf[:0]); n != 0 || err != nil {
		t.Fatalf("Read of an empty buf: %d, %v", n, err)
	}
}

// consumerWaiting returns the number of pull requests waiting on the
// buffer's consumer.
func consumerWaiting(t *testing.T, c *Conn, name string) int {
	t.Helper()
	cons, err := c.js.Consumer(testCtx(t), name, name)
	if err != nil {
		t.Fatal(err)
	}
	return cons.CachedInfo().NumWaiting
}

// An empty buffer makes Read return 0 after its timeout, or at once when
// ctx is done.
func TestReadTimeout(t *testing.T) {
	t.Parallel()
	sp := spec("empty-0", 10)
	_, c := setup(t, sp, nil)
	r := newReader(t, c, sp.Name, 200*time.Millisecond)
	buf := make([]isb.ReadMessage, 10)
	start := time.Now()
	n, err := r.Read(testCtx(t), buf)
	if elapsed := time.Since(start); n != 0 || err != nil || elapsed < 150*time.Millisecond || elapsed > 1500*time.Millisecond {
		t.Fatalf("Read on empty = %d, %v after %v; want 0, nil after about 200ms", n, err, elapsed)
	}

	long := newReader(t, c, sp.Name, time.Minute)
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	n, err = long.Read(ctx, buf)
	// Well under the reader's minute, and far over the context's 100ms, for
	// a busy machine.
	if elapsed := time.Since(start); n != 0 || err != nil || elapsed > 10*time.Second {
		t.Fatalf("Read with a 100ms context = %d, %v after %v", n, err, elapsed)
	}
	ctx, cancel = context.WithCancel(testCtx(t))
	go func() {
		runtest.WaitFor(t, "the waiting fetch", func() bool { return consumerWaiting(t, c, sp.Name) > 0 })
		cancel()
	}()
	start = time.Now()
	n, err = long.Read(ctx, buf)
	if elapsed := time.Since(start); n != 0 || err != nil || elapsed > 5*time.Second {
		t.Fatalf("Read with a cancelled context = %d, %v after %v", n, err, elapsed)
	}
}

// Two readers of one buffer share its messages: what one holds the other
// does not get, and together they read each message once.
func TestReadersShareConsumer(t *testing.T) {
	t.Parallel()
	sp := spec("shared-0", 1000)
	s, c := setup(t, sp, nil)
	c2 := connect(t, s, nil)
	write(t, newWriter(t, c, sp, "up"), messages("m", 200))
	r1 := newReader(t, c, sp.Name, 200*time.Millisecond)
	r2 := newReader(t, c2, sp.Name, 200*time.Millisecond)
	first := readN(t, r1, 10, 10)
	second := readN(t, r2, 10, 10)
	seen := map[string]string{}
	for _, m := range first {
		seen[m.ID] = "r1"
	}
	for _, m := range second {
		if seen[m.ID] != "" {
			t.Fatalf("%s read by r1 and r2", m.ID)
		}
		seen[m.ID] = "r2"
	}
	ack(t, r1, first)
	ack(t, r2, second)

	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, r := range map[string]*Reader{"r1": r1, "r2": r2} {
		wg.Go(func() {
			buf := make([]isb.ReadMessage, 7)
			for {
				n, err := r.Read(testCtx(t), buf)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return // a 200ms read timeout passed: the buffer is empty
				}
				mu.Lock()
				for _, m := range buf[:n] {
					if prev := seen[m.ID]; prev != "" {
						t.Errorf("%s read by %s and %s", m.ID, prev, name)
					}
					seen[m.ID] = name
				}
				mu.Unlock()
				if err := r.Ack(testCtx(t), buf[:n]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("read %d distinct messages, want 200", len(seen))
	}
	waitEmpty(t, c, sp.Name)
}

// A message read and never acked is delivered again once AckWait has passed
// without in-progress acks (its reader's connection is gone, as when its
// process dies).
func TestRedeliveryAfterAckWait(t *testing.T) {
	t.Parallel()
	sp := spec("redeliver-0", 10)
	s, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 1))
	dying := connect(t, s, func(cfg *Config) { cfg.AckWait = time.Second })
	r1 := newReader(t, dying, sp.Name, time.Second)
	readAt := time.Now() // before the delivery, which starts AckWait
	got := readN(t, r1, 1, 1)
	dying.Close()
	r2 := newReader(t, c, sp.Name, 5*time.Second)
	again := readN(t, r2, 1, 1)
	if since := time.Since(readAt); since < time.Second {
		t.Fatalf("redelivered after %v, before AckWait", since)
	}
	if again[0].ID != got[0].ID {
		t.Fatalf("redelivered %s, want %s", again[0].ID, got[0].ID)
	}
	if bi := info(t, c, sp.Name); bi.Redelivered != 1 {
		t.Fatalf("%+v", bi)
	}
	ack(t, r2, again)
	waitEmpty(t, c, sp.Name)
}

// Close hands back the messages read and not acked: they are delivered again
// at once, not after AckWait.
func TestCloseHandsBack(t *testing.T) {
	t.Parallel()
	sp := spec("closeback-0", 10)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = 30 * time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 2))
	r1, err := c.Reader(sp.Name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := readN(t, r1, 2, 2)
	ack(t, r1, got[:1])
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := r1.Read(testCtx(t), make([]isb.ReadMessage, 1)); n != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %d, %v", n, err)
	}
	r2 := newReader(t, c, sp.Name, 5*time.Second)
	start := time.Now()
	again := readN(t, r2, 1, 1)
	if since := time.Since(start); since > 5*time.Second || again[0].ID != "m1" {
		t.Fatalf("read %s again after %v; want m1 at once", again[0].ID, since)
	}
	ack(t, r2, again)
	waitEmpty(t, c, sp.Name)
}

// Nack hands a message back, to be delivered again no sooner than its delay.
func TestNackWithDelay(t *testing.T) {
	t.Parallel()
	sp := spec("nack-0", 10)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = 10 * time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 1))
	r := newReader(t, c, sp.Name, 5*time.Second)
	for _, delay := range []time.Duration{0, 700 * time.Millisecond} {
		got := readN(t, r, 1, 1)
		nackAt := time.Now()
		if err := r.Nack(testCtx(t), got, delay); err != nil {
			t.Fatal(err)
		}
		again := readN(t, r, 1, 1)
		since := time.Since(nackAt)
		if since < delay || (delay == 0 && since > 2*time.Second) {
			t.Fatalf("Nack with delay %v: delivered again after %v", delay, since)
		}
		if again[0].ID != "m0" {
			t.Fatalf("got %s", again[0].ID)
		}
		if err := r.Nack(testCtx(t), again, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := readN(t, r, 1, 1)
	ack(t, r, got)
	if err := r.Nack(testCtx(t), got, 0); err != nil { // after Ack: nothing happens
		t.Fatal(err)
	}
	waitEmpty(t, c, sp.Name)
}

// A message held (read, not acked) longer than AckWait is not delivered to
// another reader: the reader keeps it in progress.
func TestInProgressKeepsMessage(t *testing.T) {
	t.Parallel()
	sp := spec("held-0", 10)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 1))
	holder := newReader(t, c, sp.Name, time.Second)
	held := readN(t, holder, 1, 1)
	other := newReader(t, c, sp.Name, 2500*time.Millisecond)
	if n, err := other.Read(testCtx(t), make([]isb.ReadMessage, 1)); n != 0 || err != nil {
		t.Fatalf("another reader got %d messages (%v) while the first held it past AckWait", n, err)
	}
	ack(t, holder, held)
	waitEmpty(t, c, sp.Name)
	if bi := info(t, c, sp.Name); bi.Redelivered != 0 {
		t.Fatalf("%+v", bi)
	}
}

// A batch fetched ahead and not taken by a Read is kept in progress past
// AckWait, like the messages read, and Close hands it back with them.
func TestFetchedAheadKeptAndHandedBack(t *testing.T) {
	t.Parallel()
	sp := spec("ahead-0", 100)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 25))
	r, err := c.Reader(sp.Name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(testCtx(t), make([]isb.ReadMessage, 10)); n != 10 || err != nil {
		t.Fatalf("Read(10) = %d, %v", n, err)
	}
	runtest.WaitFor(t, "the batch fetched ahead", func() bool { return info(t, c, sp.Name).AckPending == 20 })
	other := newReader(t, c, sp.Name, 2500*time.Millisecond)
	got := readN(t, other, 5, 10)
	if n, err := other.Read(testCtx(t), make([]isb.ReadMessage, 10)); n != 0 || err != nil {
		t.Fatalf("another reader got %d messages (%v) while the first held them past AckWait", n, err)
	}
	ack(t, other, got)
	if bi := info(t, c, sp.Name); bi.Redelivered != 0 || bi.AckPending != 20 {
		t.Fatalf("%+v", bi)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again := readN(t, other, 20, 20)
	ack(t, other, again)
	seen := map[string]bool{}
	for _, id := range ids(append(got, again...)) {
		seen[id] = true
	}
	if len(seen) != 25 {
		t.Fatalf("read %d distinct messages, want 25", len(seen))
	}
	waitEmpty(t, c, sp.Name)
}

// A message that cannot be decoded is dropped and reported, and the others
// of the batch are read.
func TestReadUndecodable(t *testing.T) {
	t.Parallel()
	sp := spec("poison-0", 10)
	_, c := setup(t, sp, nil)
	w := newWriter(t, c, sp, "up")
	write(t, w, messages("a", 1))
	if _, err := c.js.Publish(testCtx(t), subject(sp.Name), []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	write(t, w, messages("b", 1))
	r := newReader(t, c, sp.Name, time.Second)
	buf := make([]isb.ReadMessage, 10)
	n, err := r.Read(testCtx(t), buf)
	if n != 2 || !errors.Is(err, ErrDecode) || buf[0].ID != "a0" || buf[1].ID != "b0" {
		t.Fatalf("Read = %d, %v; ids %v", n, err, ids(buf[:n]))
	}
	for _, want := range []string{"poison-0", "stream sequence 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	ack(t, r, buf[:n])
	waitEmpty(t, c, sp.Name)
}

// A message delivered to a Read its caller gave up on is handed back at once,
// not after AckWait.
func TestReadGivenUpHandsBackLateMessage(t *testing.T) {
	t.Parallel()
	sp := spec("late-0", 10)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = 30 * time.Second })
	r1 := newReader(t, c, sp.Name, time.Minute)
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		runtest.WaitFor(t, "the waiting fetch", func() bool { return consumerWaiting(t, c, sp.Name) > 0 })
		cancel()
	}()
	if n, err := r1.Read(ctx, make([]isb.ReadMessage, 1)); n != 0 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	// The given-up pull is still open on the server: it takes this one.
	write(t, newWriter(t, c, sp, "up"), messages("m", 1))
	r2 := newReader(t, c, sp.Name, 10*time.Second)
	start := time.Now()
	got := readN(t, r2, 1, 1)
	if since := time.Since(start); since > 5*time.Second {
		t.Fatalf("read after %v", since)
	}
	ack(t, r2, got)
	waitEmpty(t, c, sp.Name)
}

// NackOptions with MaxDeliveries hands a message back until it has been
// delivered that many times, then the server drops it.
func TestNackOptionsMaxDeliveries(t *testing.T) {
	t.Parallel()
	sp := spec("nackmax-0", 10)
	_, c := setup(t, sp, func(cfg *Config) { cfg.AckWait = 10 * time.Second })
	write(t, newWriter(t, c, sp, "up"), messages("m", 1))
	r := newReader(t, c, sp.Name, 2*time.Second)
	opts := isb.NackOptions{MaxDeliveries: 3}
	for delivery := 1; delivery <= 3; delivery++ {
		got := readN(t, r, 1, 1)
		if got[0].ID != "m0" {
			t.Fatalf("delivery %d: got %s", delivery, got[0].ID)
		}
		if err := r.NackOptions(testCtx(t), got, opts); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Read(testCtx(t), make([]isb.ReadMessage, 1)); n != 0 || err != nil {
		t.Fatalf("read after the third delivery: %d, %v; want the message dropped", n, err)
	}
	waitEmpty(t, c, sp.Name)
}
