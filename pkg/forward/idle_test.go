package forward

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// scripted is a reader whose reads return, in turn, as many messages as its
// script says (all it has for the read when the script is over) and note the
// clock's time; wait, when set, is how far each read moves the clock, as a
// reader that waits for its read timeout would.
type scripted struct {
	clk    *clock.Manual
	script []int
	after  int // messages per read once the script is over
	wait   time.Duration

	enough   chan struct{} // closed at the enoughAt-th read, when not nil
	enoughAt int

	mu    sync.Mutex
	reads []time.Duration // since t0
	acked int
	next  int
}

var t0 = time.Unix(1_700_000_000, 0)

func (s *scripted) Read(_ context.Context, buf []isb.ReadMessage) (int, error) {
	if s.wait > 0 {
		s.clk.Advance(s.wait)
	}
	s.mu.Lock()
	s.reads = append(s.reads, s.clk.Now().Sub(t0))
	n := s.after
	if len(s.reads) <= len(s.script) {
		n = s.script[len(s.reads)-1]
	}
	n = min(n, len(buf))
	for i := range n {
		buf[i] = isb.ReadMessage{Message: isb.Message{Value: []byte(strconv.Itoa(s.next))}, Handle: s.next}
		s.next++
	}
	if len(s.reads) == s.enoughAt && s.enough != nil {
		close(s.enough)
	}
	s.mu.Unlock()
	return n, nil
}

func (s *scripted) Ack(_ context.Context, msgs []isb.ReadMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked += len(msgs)
	return nil
}

// readTimes returns when the reads happened, since t0.
func (s *scripted) readTimes() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.reads...)
}

// advance moves clk by step, steps times, each time once the forwarder waits
// on it, and returns once it waits again.
func advance(t *testing.T, clk *clock.Manual, step time.Duration, steps int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("the forwarder does not wait on the clock at %v", clk.Now().Sub(t0))
		}
		if i == steps {
			return
		}
		clk.Advance(step)
	}
}

// TestDrySourceIsNotSpunOn: a reader that answers every read at once with
// nothing is read after pauses of 1ms, 2ms, 4ms, ... up to MaxIdlePause, not
// in a busy loop; none of the tokens granted for those reads counts.
func TestDrySourceIsNotSpunOn(t *testing.T) {
	clk := clock.NewManual(t0)
	src := &scripted{clk: clk}
	lim := &countingLimiter{}
	h := start(t, Deps{Reader: src, Throttle: &throttle.Throttle{Limiter: lim}}, Options{Clock: clk, MaxIdlePause: 100 * time.Millisecond})
	advance(t, clk, time.Millisecond, 1000) // one second, a millisecond at a time
	got := src.readTimes()
	ms := time.Millisecond
	want := []time.Duration{0, 1 * ms, 3 * ms, 7 * ms, 15 * ms, 31 * ms, 63 * ms, 127 * ms,
		227 * ms, 327 * ms, 427 * ms, 527 * ms, 627 * ms, 727 * ms, 827 * ms, 927 * ms}
	if len(got) != len(want) {
		t.Fatalf("read %d times in a second of dryness, at %v; want %d, at %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("read at %v; want at %v", got, want)
		}
	}
	h.stop(t) // while it pauses: shutdown does not wait for the pause to end
	if g, d := testutil.ToFloat64(h.m.Granted), testutil.ToFloat64(h.m.Deposited); g != 0 || d != 0 {
		t.Fatalf("granted %v, deposited %v while nothing was read; want 0 and 0", g, d)
	}
	if u := lim.used(); u != 0 {
		t.Fatalf("%d tokens used while nothing was read; want every grant given back", u)
	}
}

// TestDataEndsTheDryPause: a read that returns messages ends the pause at
// once, and the next run of empty reads starts again from 1ms; the first
// read after an empty one takes one token, so one message (of the 3 and of
// the 5 the reader has), the next a batch's; the granted metric counts one
// token per message read: 1 + 4 + 1.
func TestDataEndsTheDryPause(t *testing.T) {
	clk := clock.NewManual(t0)
	src := &scripted{clk: clk, script: []int{0, 0, 0, 0, 3, 4, 0, 0, 5}}
	lim := &countingLimiter{}
	h := start(t, Deps{Reader: src, Throttle: &throttle.Throttle{Limiter: lim}}, Options{Clock: clk, BatchSize: 10})
	advance(t, clk, time.Millisecond, 25)
	ms := time.Millisecond
	// Empty at 0, 1, 3, 7 (pauses 1, 2, 4, 8); data at 15 and at once again;
	// empty at 15 and 16 (pauses 1, 2); data at 18; then empty from 18 on.
	want := []time.Duration{0, 1 * ms, 3 * ms, 7 * ms, 15 * ms, 15 * ms, 15 * ms, 16 * ms, 18 * ms, 18 * ms, 19 * ms, 21 * ms, 25 * ms}
	got := src.readTimes()
	if len(got) < len(want) {
		t.Fatalf("read at %v; want at %v...", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("read at %v; want at %v...", got, want)
		}
	}
	h.stop(t)
	if g, d := testutil.ToFloat64(h.m.Granted), testutil.ToFloat64(h.m.Deposited); g != 6 || d != 0 {
		t.Fatalf("granted %v, deposited %v; want one token per message read (6) and 0", g, d)
	}
	if u := lim.used(); u != 6 {
		t.Fatalf("%d tokens used; want 6, one per message read", u)
	}
	if src.acked != 6 || len(h.out.Messages()) != 6 {
		t.Fatalf("acked %d, wrote %d; want 6", src.acked, len(h.out.Messages()))
	}
}

// TestReaderThatWaitsIsNotPaused: a reader that waits for its read timeout
// before it answers empty, as the ISB buffers do, is read again at once.
func TestReaderThatWaitsIsNotPaused(t *testing.T) {
	clk := clock.NewManual(t0)
	src := &scripted{clk: clk, wait: 100 * time.Millisecond, enough: make(chan struct{}), enoughAt: 50}
	h := start(t, Deps{Reader: src}, Options{Clock: clk, MaxIdlePause: 100 * time.Millisecond})
	select { // the clock moves only in Read: a pause would stop the reads
	case <-src.enough:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d reads, then none: the forwarder waits for the clock", len(src.readTimes()))
	}
	h.stop(t)
	if got := src.readTimes(); got[49] != 50*100*time.Millisecond {
		t.Fatalf("the 50th read at %v; want right after the 50th wait", got[49])
	}
}
