package forward

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// answering is a sink that answers the attempt-th write of each message (from
// 1) with answer(attempt), and writes to out the messages it answers nil.
type answering struct {
	answer func(attempt int) error
	out    *memory.Buffer
	wrote  chan int // when not nil, gets the number of each write, from 1

	mu     sync.Mutex
	seen   map[string]int
	writes int
}

func newAnswering(answer func(attempt int) error) *answering {
	return &answering{answer: answer, seen: map[string]int{}, out: memory.New("sink", 1<<20, time.Millisecond, nil)}
}

func (s *answering) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.mu.Lock()
	var ok []isb.Message
	for i, m := range msgs {
		s.seen[string(m.Value)]++
		if errs[i] = s.answer(s.seen[string(m.Value)]); errs[i] == nil {
			ok = append(ok, m)
		}
	}
	s.writes++
	n := s.writes
	s.mu.Unlock()
	if s.wrote != nil {
		s.wrote <- n
	}
	return s.out.Write(ctx, ok, make([]error, len(ok)))
}

// attempts returns how many times each message was offered to the sink.
func (s *answering) attempts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.seen)
}

// throttledUntil answers a throttle signal asking for retryAfter to the first
// n attempts, then nil.
func throttledUntil(n int, retryAfter time.Duration) func(int) error {
	return func(attempt int) error {
		if attempt <= n {
			return &isb.ThrottledError{RetryAfter: retryAfter, Cause: "429 Too Many Requests"}
		}
		return nil
	}
}

// receive returns the next value of c, failing the test after 10 s.
func receive(t *testing.T, c <-chan int) int {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no write to the sink")
		return 0
	}
}

// blockUntil waits until n timers are pending on clk.
func blockUntil(t *testing.T, clk *clock.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("the forwarder does not wait on the clock: %d timers pending; want %d", clk.Pending(), n)
	}
}

// TestThrottledSinkIsRetriedAfterItsRetryAfter: a sink that answers a throttle
// signal asking for 2 s is written again 2 s later on the forwarder's clock,
// not sooner, while the tracker says downstream_throttled; the wait uses no
// retry step, counts no write error, and counts the signals.
func TestThrottledSinkIsRetriedAfterItsRetryAfter(t *testing.T) {
	testThrottledSinkIsRetriedAfterItsRetryAfter(t)
}

func testThrottledSinkIsRetriedAfterItsRetryAfter(t *testing.T, modes ...func(*Options)) {
	clk := clock.NewManual(t0)
	sink := newAnswering(throttledUntil(1, 2*time.Second))
	sink.wrote = make(chan int, 10)
	h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink}, Options{Clock: clk,
		Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond, Steps: 1, OnFailure: Drop}}, modes...)
	receive(t, sink.wrote)
	blockUntil(t, clk, 1)
	h.waitThrottled(t, ratelimit.ReasonDownstreamThrottled)
	clk.Advance(2*time.Second - time.Millisecond)
	if clk.Pending() != 1 {
		t.Fatal("the forwarder stopped waiting before the 2 s the sink asked for")
	}
	clk.Advance(time.Millisecond)
	if n := receive(t, sink.wrote); n != 2 {
		t.Fatalf("write %d after the wait; want the second", n)
	}
	h.waitAcked(t, 10)
	h.waitThrottled(t)
	if s := h.tr.Seconds(ratelimit.ReasonDownstreamThrottled); s != 2 {
		t.Fatalf("throttled by the downstream for %v s; want 2", s)
	}
	if n := len(sink.out.Messages()); n != 10 {
		t.Fatalf("sink took %d; want all 10 (a throttled attempt is no retry step)", n)
	}
	m := h.m
	if sig, e, d := testutil.ToFloat64(m.ThrottleSignals), testutil.ToFloat64(m.Errors.WithLabelValues(StageWrite)),
		testutil.ToFloat64(m.Dropped); sig != 10 || e != 0 || d != 0 {
		t.Fatalf("throttle signals %v, write errors %v, dropped %v; want 10, 0, 0", sig, e, d)
	}
}

// TestThrottleWaitIsTheLongerOfBackoffAndRetryAfter: without a Retry-After,
// or with one shorter than the backoff, the forwarder waits the backoff
// (between half of it and all of it).
func TestThrottleWaitIsTheLongerOfBackoffAndRetryAfter(t *testing.T) {
	for _, retryAfter := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprint("retryAfter=", retryAfter), func(t *testing.T) {
			clk := clock.NewManual(t0)
			sink := newAnswering(throttledUntil(1, retryAfter))
			sink.wrote = make(chan int, 10)
			h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink}, Options{Clock: clk,
				Retry: RetryPolicy{Interval: time.Second, MaxInterval: time.Second}})
			receive(t, sink.wrote)
			blockUntil(t, clk, 1)
			clk.Advance(500*time.Millisecond - time.Millisecond)
			if clk.Pending() != 1 {
				t.Fatal("waited less than half the backoff")
			}
			clk.Advance(501 * time.Millisecond)
			receive(t, sink.wrote)
			h.waitAcked(t, 10)
		})
	}
}

// TestThrottledAttemptsUseNoRetrySteps: with steps: 2 and onFailure: drop, a
// message throttled five times and then failed once is still written.
func TestThrottledAttemptsUseNoRetrySteps(t *testing.T) { testThrottledAttemptsUseNoRetrySteps(t) }

func testThrottledAttemptsUseNoRetrySteps(t *testing.T, modes ...func(*Options)) {
	sink := newAnswering(func(attempt int) error {
		switch {
		case attempt <= 5:
			return &isb.ThrottledError{Cause: "503 Service Unavailable"}
		case attempt == 6:
			return errors.New("connection reset")
		}
		return nil
	})
	h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink},
		Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond, Steps: 2, OnFailure: Drop}}, modes...)
	h.waitAcked(t, 10)
	if n := len(sink.out.Messages()); n != 10 {
		t.Fatalf("sink took %d; want all 10", n)
	}
	m := h.m
	if sig, e, d := testutil.ToFloat64(m.ThrottleSignals), testutil.ToFloat64(m.Errors.WithLabelValues(StageWrite)),
		testutil.ToFloat64(m.Dropped); sig != 50 || e != 10 || d != 0 {
		t.Fatalf("throttle signals %v, write errors %v, dropped %v; want 50, 10, 0", sig, e, d)
	}
}

// TestUnavailableAttemptsUseNoRetrySteps: writes that fail because the
// sink's server failed (isb.ErrUnavailable, a user-defined sink that
// crashed) are retried until it is back, using none of the two steps that
// onFailure drop allows; a plain failure after them still uses one.
func TestUnavailableAttemptsUseNoRetrySteps(t *testing.T) { testUnavailableAttemptsUseNoRetrySteps(t) }

func testUnavailableAttemptsUseNoRetrySteps(t *testing.T, modes ...func(*Options)) {
	sink := newAnswering(func(attempt int) error {
		switch {
		case attempt <= 5:
			return fmt.Errorf("user-defined sink: Unavailable: connection refused: %w", isb.ErrUnavailable)
		case attempt == 6:
			return errors.New("connection reset")
		}
		return nil
	})
	h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink},
		Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond, Steps: 2, OnFailure: Drop}}, modes...)
	h.waitAcked(t, 10)
	if n := len(sink.out.Messages()); n != 10 {
		t.Fatalf("sink took %d; want all 10", n)
	}
	if e, d := testutil.ToFloat64(h.m.Errors.WithLabelValues(StageWrite)), testutil.ToFloat64(h.m.Dropped); e != 60 || d != 0 {
		t.Fatalf("write errors %v, dropped %v; want 60, 0", e, d)
	}
}

// TestShutdownDuringAThrottleWait: a Retry-After longer than the shutdown
// deadline ends with the batch given up at the deadline, and the tracker no
// longer throttled.
func TestShutdownDuringAThrottleWait(t *testing.T) {
	sink := newAnswering(throttledUntil(1<<30, time.Hour))
	in := filledBuffer(t, 10)
	h := start(t, Deps{Reader: in, Sink: sink}, Options{ShutdownTimeout: 50 * time.Millisecond})
	h.waitThrottled(t, ratelimit.ReasonDownstreamThrottled)
	h.cancel()
	h.waitReturned(t)
	if ok, rs := h.tr.Throttled(); ok {
		t.Fatalf("still throttled for %v after Run returned", rs)
	}
	if s := in.Stats(); s.Acked != 0 || s.Pending != 10 {
		t.Fatalf("source %+v; want the batch nacked, none acked", s)
	}
}

// rejectedError is a rejection as an HTTP sink answers one.
var rejectedError = fmt.Errorf("%w: 400 Bad Request: no such field", isb.ErrRejected)

// TestRejectedMessages: a message the sink rejects goes to the fallback sink
// at once when there is one, is dropped at once with onFailure: drop (logged
// once per batch), and is otherwise retried with a warning naming the cause.
func TestRejectedMessages(t *testing.T) { testRejectedMessages(t) }

func testRejectedMessages(t *testing.T, modes ...func(*Options)) {
	rejectFirst := func(n int) func(int) error {
		return func(attempt int) error {
			if attempt <= n {
				return rejectedError
			}
			return nil
		}
	}
	t.Run("to the fallback sink", func(t *testing.T) {
		sink := newAnswering(rejectFirst(1 << 30))
		fb := newAnswering(throttledUntil(1, 0)) // the fallback sink is throttled once
		h := start(t, Deps{Reader: filledBuffer(t, 20), Sink: sink, Fallback: fb},
			Options{Retry: RetryPolicy{Interval: time.Millisecond, Steps: 5, OnFailure: Retry}}, modes...)
		h.waitAcked(t, 20)
		if n := len(fb.out.Messages()); n != 20 {
			t.Fatalf("fallback has %d; want all 20", n)
		}
		for v, n := range sink.attempts() {
			if n != 1 {
				t.Fatalf("message %s offered to the sink %d times; want once", v, n)
			}
		}
		m := h.m
		if f, e, sig := testutil.ToFloat64(m.Fallback), testutil.ToFloat64(m.Errors.WithLabelValues(StageWrite)),
			testutil.ToFloat64(m.ThrottleSignals); f != 20 || e != 20 || sig != 20 {
			t.Fatalf("fallback %v, write errors %v, throttle signals %v; want 20 each", f, e, sig)
		}
	})
	t.Run("dropped", func(t *testing.T) {
		sink := newAnswering(rejectFirst(1 << 30))
		core, logs := observer.New(zap.WarnLevel)
		h := start(t, Deps{Reader: filledBuffer(t, 20), Sink: sink, Logger: zap.New(core)},
			Options{BatchSize: 10, Retry: RetryPolicy{Interval: time.Millisecond, Steps: 5, OnFailure: Drop}}, modes...)
		h.waitAcked(t, 20)
		if d := testutil.ToFloat64(h.m.Dropped); d != 20 {
			t.Fatalf("dropped %v; want 20", d)
		}
		if n := slices.Max(slices.Collect(maps.Values(sink.attempts()))); n != 1 {
			t.Fatalf("a message offered to the sink %d times; want once", n)
		}
		drops := logs.FilterMessageSnippet("dropping messages the sink rejected")
		if drops.Len() != 2 {
			t.Fatalf("logged %v; want one line per batch of 10", logs.All())
		}
		if c := drops.All()[0].ContextMap(); c["messages"] != int64(10) || c["error"] != rejectedError.Error() {
			t.Fatalf("logged %v; want 10 messages and the cause", c)
		}
	})
	t.Run("retried", func(t *testing.T) {
		sink := newAnswering(rejectFirst(3))
		core, logs := observer.New(zap.WarnLevel)
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Logger: zap.New(core)},
			Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond}}, modes...)
		h.waitAcked(t, 10)
		if n := len(sink.out.Messages()); n != 10 {
			t.Fatalf("sink took %d; want all 10 after retries", n)
		}
		if e := testutil.ToFloat64(h.m.Errors.WithLabelValues(StageWrite)); e != 30 {
			t.Fatalf("write errors %v; want 3 per message", e)
		}
		warned := logs.FilterMessageSnippet("the sink rejected messages").FilterField(zap.Error(rejectedError))
		if warned.Len() == 0 {
			t.Fatalf("logged %v; want a warning naming the cause", logs.All())
		}
	})
}

// TestThrottledSecondsByReason: the throttled-seconds counter has a series for
// each reason, downstream_throttled among them.
func TestThrottledSecondsByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg, NewTracker(nil))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "sluice_ratelimit_throttled_seconds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				got = append(got, l.GetValue())
			}
		}
	}
	slices.Sort(got)
	want := []string{"awaiting_agreement", "downstream_full", "downstream_throttled", "rate_limited", "store_unavailable"}
	if !slices.Equal(got, want) {
		t.Fatalf("reasons %v; want %v", got, want)
	}
	if n := testutil.CollectAndCount(reg, "sluice_forward_throttle_signals_total"); n != 1 {
		t.Fatalf("sluice_forward_throttle_signals_total: %d series; want 1", n)
	}
}

// TestThrottledRetryTakesTokensAgain checks that messages sent again after a
// throttle signal take tokens anew: the attempt the sink refused spent the
// first ones, and a retry on those would come on top of a later epoch's grant.
// A retry after an ordinary failure takes none.
func TestThrottledRetryTakesTokensAgain(t *testing.T) { testThrottledRetryTakesTokensAgain(t) }

func testThrottledRetryTakesTokensAgain(t *testing.T, modes ...func(*Options)) {
	for _, tt := range []struct {
		name string
		err  error
		want int
	}{
		{"throttled", &isb.ThrottledError{Cause: "429 Too Many Requests"}, 20},
		{"failed", errors.New("connection reset"), 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := newAnswering(func(attempt int) error {
				if attempt == 1 {
					return tt.err
				}
				return nil
			})
			h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Throttle: &throttle.Throttle{Limiter: &countingLimiter{}}},
				Options{BatchSize: 10, Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond}}, modes...)
			h.waitAcked(t, 10)
			// granted_total counts the tokens kept: not those of a read
			// still waiting for messages.
			if got := testutil.ToFloat64(h.m.Granted); got != float64(tt.want) {
				t.Fatalf("granted_total %v for 10 messages; want %d", got, tt.want)
			}
		})
	}
}

// freshLimiter is a countingLimiter whose epochs are the whole seconds of
// clk, and whose grants come from epoch stale until the test moves it on.
type freshLimiter struct {
	countingLimiter
	clk   *clock.Manual
	epoch atomic.Int64
}

func (l *freshLimiter) FreshAfter(d, margin time.Duration) (time.Duration, int64) {
	now := l.clk.Now()
	at := now.Add(d)
	if left := at.Truncate(time.Second).Add(time.Second).Sub(at); left < margin {
		at = at.Truncate(time.Second).Add(time.Second)
	}
	return at.Sub(now), at.Unix()
}

func (l *freshLimiter) Epoch() (int64, time.Duration) {
	now := l.clk.Now()
	return now.Unix(), now.Truncate(time.Second).Add(time.Second).Sub(now)
}

func (l *freshLimiter) TryAcquire(n int) (ratelimit.Grant, ratelimit.Reason) {
	g, r := l.countingLimiter.TryAcquire(n)
	return ratelimit.GrantOf(g.Tokens, l.epoch.Load()), r
}

// TestThrottleWaitLeavesAFreshEpoch: a wait for a throttled sink that would
// end less than freshMargin before an epoch ends runs on to the next epoch,
// and the messages sent again take no tokens of an epoch before it, even
// while the limiter has not yet renewed it.
func TestThrottleWaitLeavesAFreshEpoch(t *testing.T) {
	clk := clock.NewManual(t0.Add(900 * time.Millisecond))
	lim := &freshLimiter{clk: clk}
	lim.epoch.Store(t0.Unix())
	sink := newAnswering(throttledUntil(1, time.Second))
	sink.wrote = make(chan int, 10)
	h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Throttle: &throttle.Throttle{Limiter: lim}}, Options{Clock: clk,
		Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond}})
	receive(t, sink.wrote)
	blockUntil(t, clk, 1)
	clk.Advance(time.Second) // the Retry-After ends 100ms before an epoch does
	if clk.Pending() != 1 {
		t.Fatal("the forwarder sent again with 100ms of the epoch left")
	}
	clk.Advance(100 * time.Millisecond) // epoch t0+2 begins; the limiter still grants t0's
	blockUntil(t, clk, 1)
	clk.Advance(throttle.StaleTokenPause)
	blockUntil(t, clk, 1) // it asks again, and waits again
	lim.epoch.Store(t0.Unix() + 2)
	clk.Advance(throttle.StaleTokenPause)
	if n := receive(t, sink.wrote); n != 2 {
		t.Fatalf("write %d after the wait; want the second", n)
	}
	h.waitAcked(t, 10)
}
