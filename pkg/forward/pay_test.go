package forward

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// sizedBuffer returns a memory buffer holding n messages of size bytes each,
// valued 0 to n-1 with leading zeros.
func sizedBuffer(t *testing.T, n, size int) *memory.Buffer {
	t.Helper()
	b := memory.New("in", n+1, 20*time.Millisecond, nil)
	msgs := make([]isb.Message, n)
	for i := range msgs {
		msgs[i] = isb.Message{Value: fmt.Appendf(nil, "%0*d", size, i)}
	}
	if err := b.Write(context.Background(), msgs, make([]error, n)); err != nil {
		t.Fatal(err)
	}
	return b
}

// bytesPerEpoch returns the payload bytes written in each epoch from first.
func (s *epochSink) bytesPerEpoch(first int64) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, w := range s.writes {
		i := int(w.epoch - first)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i] += len(w.value)
	}
	return out
}

// epochLog records a limiter's epoch summaries.
type epochLog struct {
	mu  sync.Mutex
	all []ratelimit.EpochSummary
}

func (l *epochLog) observe(s ratelimit.EpochSummary) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

// check fails when an epoch granted more than its share or its pool, or
// wrote more than its pool.
func (l *epochLog) check(t *testing.T, written []int, first int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		pool := s.PoolMilli / 1000
		if s.Granted > s.Share || s.Granted > pool {
			t.Errorf("epoch %d: granted %d; share %d, pool %d", s.Epoch-first, s.Granted, s.Share, pool)
		}
		if i := int(s.Epoch - first); i >= 0 && i < len(written) && int64(written[i]) > pool {
			t.Errorf("epoch %d: %d written; pool %d (written %v)", i, written[i], pool, written)
		}
	}
}

// waitIdle waits, at most 10s, until the forwarder waits on clk with no
// batch in flight: a limiter it was given has a caller waiting, or a timer
// beyond the limiters' own is pending, and what it read is acked but for
// the batch that waits.
func (h *harness) waitIdle(t *testing.T, clk *clock.Manual, lims ...*ratelimit.Limiter) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		waiting := clk.Pending() > len(lims)
		for _, l := range lims {
			waiting = waiting || l.Status().Waiting > 0
		}
		// A batch that waits for its bytes or cost is read and not acked.
		if waiting && uint64(testutil.ToFloat64(h.m.Read)) <= h.in.Stats().Acked+uint64(h.f.readSize()) {
			return
		}
		if time.Now().After(deadline) {
			ws := 0
			for _, l := range lims {
				ws += l.Status().Waiting
			}
			t.Fatalf("the forwarder does not wait on the clock: %d timers, %d waiting, read %v, acked %d",
				clk.Pending(), ws, testutil.ToFloat64(h.m.Read), h.in.Stats().Acked)
		}
	}
}

// runEpochs advances clk a second at a time, each once the forwarder waits
// with no batch in flight, until it has acked n messages, at most epochs
// seconds.
func (h *harness) runEpochs(t *testing.T, clk *clock.Manual, n uint64, epochs int, lims ...*ratelimit.Limiter) {
	t.Helper()
	for step := 0; step < epochs && h.in.Stats().Acked < n; step++ {
		h.waitIdle(t, clk, lims...)
		clk.Advance(time.Second)
	}
	h.waitAcked(t, n)
}

// newLimiter returns a limiter on clk that logs its epochs.
func newLimiter(t *testing.T, cfg ratelimit.Config, clk *clock.Manual) (*ratelimit.Limiter, *epochLog) {
	t.Helper()
	log := &epochLog{}
	l, err := ratelimit.New(cfg, ratelimit.WithClock(clk), ratelimit.WithEpochObserver(log.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, log
}

// TestBytesLimit: with a byte limit beside a message limit that never
// throttles, no epoch writes more payload bytes than its byte pool, in
// every ramp mode and every way of forwarding, and every message is
// written once.
func TestBytesLimit(t *testing.T) {
	modes := []ratelimit.Mode{ratelimit.Relaxed, ratelimit.Scheduled, ratelimit.OnlyIfUsed, ratelimit.GoBackN}
	for _, mode := range modes {
		for _, fm := range keyedModes {
			t.Run(mode.String()+"/"+fm.name, func(t *testing.T) {
				clk := clock.NewManual(t0)
				msgs, _ := newLimiter(t, ratelimit.Config{Max: 1000, Min: 1000}, clk)
				cfg := ratelimit.DefaultConfig(100)
				cfg.Min, cfg.RampUpDuration, cfg.Mode = 40, 3*time.Second, mode
				bytes, log := newLimiter(t, cfg, clk)
				in := sizedBuffer(t, 60, 10)
				es := newEpochSink(clk)
				opts := Options{BatchSize: 4, Clock: clk, MaxIdlePause: time.Millisecond}
				fm.set(&opts)
				h := start(t, Deps{Reader: in, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{Limiter: msgs.Gate(), Bytes: bytes.Gate()}}, opts)
				h.runEpochs(t, clk, 60, 30, msgs, bytes)
				written := es.bytesPerEpoch(t0.Unix())
				if sum(written) != 600 {
					t.Fatalf("%d bytes written; want 600 (per epoch %v)", sum(written), written)
				}
				// The forwarder stops before its limiters close under it;
				// closing logs the last epoch.
				h.stop(t)
				bytes.Close(context.Background())
				log.check(t, written, t0.Unix())
				if written[0] != 40 {
					t.Errorf("epoch 0: %d bytes written; want min, 40 (per epoch %v)", written[0], written)
				}
				if got := testutil.ToFloat64(h.m.Bytes); got != 600 {
					t.Errorf("bytes_granted_total %v; want 600", got)
				}
			})
		}
	}
}

// TestBytesLargerThanAnEpoch: a message bigger than a whole epoch's share
// collects the tokens of ceil(size/share) epochs and then goes on; no
// epoch grants more than its share.
func TestBytesLargerThanAnEpoch(t *testing.T) {
	for _, size := range []int{350, 400} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			clk := clock.NewManual(t0)
			msgs, _ := newLimiter(t, ratelimit.Config{Max: 1000, Min: 1000}, clk)
			bytes, log := newLimiter(t, ratelimit.Config{Max: 100, Min: 100}, clk)
			in := sizedBuffer(t, 1, size)
			es := newEpochSink(clk)
			h := start(t, Deps{Reader: in, Sink: es, Throttle: &throttle.Throttle{Limiter: msgs, Bytes: bytes}},
				Options{BatchSize: 4, Clock: clk, MaxIdlePause: time.Millisecond})
			h.runEpochs(t, clk, 1, 10, msgs, bytes)
			written := es.bytesPerEpoch(t0.Unix())
			epochs := (size + 99) / 100
			if len(written) != epochs+1 || written[epochs] != size {
				t.Fatalf("bytes per epoch %v; want the %d in epoch %d", written, size, epochs)
			}
			h.stop(t) // before its limiters close under it
			bytes.Close(context.Background())
			log.check(t, nil, t0.Unix())
		})
	}
}

// costOfLen is a cost of one token per payload byte.
func costOfLen(m *isb.Message) (int, error) { return len(m.Value), nil }

// TestCost: messages that cost their payload's length take that many tokens
// of the message limit: ten 10-byte messages an epoch under a limit of 100
// (batches of two, paid whole), and never more tokens than the pool in an
// epoch. Messages that cost 0 give
// their read's token back.
func TestCost(t *testing.T) {
	for _, fm := range keyedModes {
		t.Run(fm.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			lim, log := newLimiter(t, ratelimit.Config{Max: 100, Min: 100}, clk)
			in := sizedBuffer(t, 40, 10)
			es := newEpochSink(clk)
			opts := Options{BatchSize: 2, Clock: clk, MaxIdlePause: time.Millisecond}
			fm.set(&opts)
			h := start(t, Deps{Reader: in, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{Limiter: lim.Gate(), Cost: costOfLen}}, opts)
			h.runEpochs(t, clk, 40, 20, lim)
			got, _ := es.perEpoch(t0.Unix())
			// Pipelined, a batch may be written after the test moved the
			// clock on; the tokens of every epoch are checked below.
			if fm.name == "sequential" && fmt.Sprint(got) != "[10 10 10 10]" {
				t.Fatalf("messages per epoch %v; want [10 10 10 10]", got)
			}
			if sum(got) != 40 {
				t.Fatalf("messages per epoch %v; want 40 in all", got)
			}
			h.stop(t) // before its limiter closes under it
			lim.Close(context.Background())
			log.check(t, nil, t0.Unix())
		})
	}
	t.Run("free", func(t *testing.T) {
		clk := clock.NewManual(t0)
		lim, _ := newLimiter(t, ratelimit.Config{Max: 10, Min: 10}, clk)
		h := start(t, Deps{Reader: filledBuffer(t, 50), Throttle: &throttle.Throttle{Limiter: lim, Cost: func(*isb.Message) (int, error) { return 0, nil }}},
			Options{BatchSize: 5, Clock: clk, MaxIdlePause: time.Millisecond})
		h.waitAcked(t, 50) // in epoch 0: every message gives its token back
		h.stop(t)
		if g := lim.Status().Granted; g != 0 {
			t.Fatalf("granted %d; want 0", g)
		}
	})
}

// TestBytesExcludeDropped: with excludeDropped the messages a function
// drops give their bytes back; without, they keep them.
func TestBytesExcludeDropped(t *testing.T) {
	for _, exclude := range []bool{false, true} {
		t.Run(fmt.Sprint("excludeDropped=", exclude), func(t *testing.T) {
			clk := clock.NewManual(t0)
			bytes, _ := newLimiter(t, ratelimit.Config{Max: 1000, Min: 1000}, clk)
			h := start(t, Deps{Reader: filledBuffer(t, 40), Mapper: dropOdd{}, Throttle: &throttle.Throttle{Bytes: bytes}},
				Options{ExcludeDropped: exclude, BatchSize: 10, Clock: clk, MaxIdlePause: time.Millisecond})
			h.waitAcked(t, 40)
			// 0-9 are 1 byte, 10-39 are 2: 70 bytes, 35 of them odd.
			want, back := int64(70), 0.0
			if exclude {
				want, back = 35, 35
			}
			if g := bytes.Status().Granted; g != want {
				t.Errorf("bytes granted %d; want %d", g, want)
			}
			if d := testutil.ToFloat64(h.m.BytesDeposited); d != back {
				t.Errorf("bytes_deposited_total %v; want %v", d, back)
			}
		})
	}
}

// TestBytesShadow: a byte limit in shadow never makes the forwarder wait,
// and counts the bytes it would have throttled.
func TestBytesShadow(t *testing.T) {
	clk := clock.NewManual(t0)
	bytes, _ := newLimiter(t, ratelimit.Config{Max: 100, Min: 100, Shadow: true}, clk)
	in := sizedBuffer(t, 40, 10)
	es := newEpochSink(clk)
	h := start(t, Deps{Reader: in, Sink: es, Throttle: &throttle.Throttle{Bytes: bytes.Gate()}},
		Options{BatchSize: 4, Clock: clk, MaxIdlePause: time.Millisecond})
	h.waitAcked(t, 40)
	if got := es.bytesPerEpoch(t0.Unix()); fmt.Sprint(got) != "[400]" {
		t.Fatalf("bytes per epoch %v; want all 400 in epoch 0", got)
	}
	if s := bytes.Status(); s.ShadowThrottled != 300 || s.Granted != 100 {
		t.Fatalf("shadow throttled %d, granted %d; want 300, 100", s.ShadowThrottled, s.Granted)
	}
}

// TestBytesAndCost: with a byte limit and a cost, no epoch writes more
// bytes than the byte pool or more cost than the message pool.
func TestBytesAndCost(t *testing.T) {
	clk := clock.NewManual(t0)
	msgs, msgLog := newLimiter(t, ratelimit.Config{Max: 60, Min: 60}, clk)
	bytes, byteLog := newLimiter(t, ratelimit.Config{Max: 70, Min: 70}, clk)
	in := sizedBuffer(t, 30, 10)
	es := newEpochSink(clk)
	h := start(t, Deps{Reader: in, Sink: es, Throttle: &throttle.Throttle{Limiter: msgs, Bytes: bytes, Cost: costOfLen}},
		Options{BatchSize: 2, Clock: clk, MaxIdlePause: time.Millisecond})
	h.runEpochs(t, clk, 30, 40, msgs, bytes)
	written := es.bytesPerEpoch(t0.Unix())
	if sum(written) != 300 {
		t.Fatalf("%d bytes written; want 300 (per epoch %v)", sum(written), written)
	}
	h.stop(t) // before its limiters close under it
	msgs.Close(context.Background())
	bytes.Close(context.Background())
	byteLog.check(t, written, t0.Unix())
	msgLog.check(t, written, t0.Unix()) // a cost of a token a byte
	t.Logf("bytes per epoch %v", written)
}

// TestGroups: a vertex allowed 100 a second in a shared limit of 10 sends
// 10 a second, the group's; with excludeDropped, the messages a function
// drops give their group tokens back.
func TestGroups(t *testing.T) {
	t.Run("held by the group", func(t *testing.T) {
		clk := clock.NewManual(t0)
		lim, log := newLimiter(t, ratelimit.Config{Max: 100, Min: 100}, clk)
		group, _ := newLimiter(t, ratelimit.Config{Max: 10, Min: 10}, clk)
		in := sizedBuffer(t, 40, 10)
		es := newEpochSink(clk)
		h := start(t, Deps{Reader: in, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{Limiter: lim.Gate(), Groups: []throttle.Limiter{group.Gate()}}},
			Options{BatchSize: 2, Clock: clk, MaxIdlePause: time.Millisecond})
		h.runEpochs(t, clk, 40, 20, lim, group)
		if got, _ := es.perEpoch(t0.Unix()); fmt.Sprint(got) != "[10 10 10 10]" {
			t.Fatalf("messages per epoch %v; want the group's [10 10 10 10]", got)
		}
		h.stop(t) // before its limiter closes under it
		lim.Close(context.Background())
		log.check(t, nil, t0.Unix())
	})
	for _, exclude := range []bool{false, true} {
		t.Run(fmt.Sprint("excludeDropped=", exclude), func(t *testing.T) {
			clk := clock.NewManual(t0)
			group, _ := newLimiter(t, ratelimit.Config{Max: 1000, Min: 1000}, clk)
			h := start(t, Deps{Reader: filledBuffer(t, 40), Mapper: dropOdd{}, Throttle: &throttle.Throttle{Groups: []throttle.Limiter{group.Gate()}}},
				Options{ExcludeDropped: exclude, BatchSize: 10, Clock: clk, MaxIdlePause: time.Millisecond})
			h.waitAcked(t, 40)
			h.stop(t) // a read in progress holds the tokens of the next batch
			want := int64(40)
			if exclude {
				want = 20
			}
			if g := group.Status().Granted; g != want {
				t.Errorf("group tokens granted %d; want %d", g, want)
			}
		})
	}
}

// TestPaidAgainInTheirEpoch: a batch written in a later second than the one
// it paid its bytes (or its cost) in, after a sink that stalled 3.5s, pays
// them again in the second it is written in, as its message tokens are taken
// again: no second writes more bytes than the byte limit, or more cost than
// the message limit, and every message is written once.
func TestPaidAgainInTheirEpoch(t *testing.T) {
	for _, stall := range []string{"write", "function"} {
		for _, paid := range []string{"bytes", "cost"} {
			t.Run(stall+"/"+paid, func(t *testing.T) { testPaidAgain(t, stall, paid) })
		}
	}
}

// stallMapper is Cat whose first call blocks until the gate opens, as a
// slow function.
type stallMapper struct {
	gate, blocked chan struct{}
	once          sync.Once
}

func (m *stallMapper) Map(ctx context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	m.once.Do(func() {
		close(m.blocked)
		<-m.gate
	})
	return udf.Cat{}.Map(ctx, in, out)
}

func testPaidAgain(t *testing.T, stall, paid string) {
	clk := clock.NewManual(t0)
	in := sizedBuffer(t, 40, 10)
	es := newEpochSink(clk)
	d := Deps{Reader: in, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{}}
	gate, blocked := make(chan struct{}), make(chan struct{})
	if stall == "write" {
		d.Sink = &stallSink{epochSink: es, gate: gate, blocked: blocked}
	} else {
		d.Mapper = &stallMapper{gate: gate, blocked: blocked}
	}
	// Batches of 3 cost 30: one token a message taken again for the
	// stalled batch would leave room for three more in its epoch.
	var lims []*ratelimit.Limiter
	batch, inEpoch3 := 3, 90
	if paid == "bytes" {
		batch, inEpoch3 = 10, 100
		lim, _ := newLimiter(t, ratelimit.Config{Max: 1000, Min: 1000}, clk)
		bytes, _ := newLimiter(t, ratelimit.Config{Max: 100, Min: 100}, clk)
		d.Throttle.Limiter, d.Throttle.Bytes, lims = lim, bytes, []*ratelimit.Limiter{lim, bytes}
	} else {
		lim, _ := newLimiter(t, ratelimit.Config{Max: 100, Min: 100}, clk)
		d.Throttle.Limiter, d.Throttle.Cost, lims = lim, costOfLen, []*ratelimit.Limiter{lim}
	}
	h := start(t, d, Options{BatchSize: batch, Clock: clk, MaxIdlePause: time.Millisecond})
	waitClosed(t, blocked, "the "+stall+" to block")
	for range 7 { // 3.5s, tick by tick of the limiters
		clk.Advance(500 * time.Millisecond)
	}
	close(gate)
	es.waitFor(t, batch)
	h.runEpochs(t, clk, 40, 30, lims...)
	h.stop(t)
	got := es.bytesPerEpoch(t0.Unix())
	for i, n := range got {
		if n > 100 {
			t.Fatalf("epoch %d: %d bytes written; limit 100 (per epoch: %v)", i, n, got)
		}
	}
	if sum(got) != 400 || got[3] != inEpoch3 {
		t.Fatalf("bytes per epoch %v; want %d in epoch 3, when the %s returned, and 400 in all", got, inEpoch3, stall)
	}
}
