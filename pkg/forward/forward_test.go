package forward

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// filledBuffer returns a memory buffer holding n messages, valued 0 to n-1.
func filledBuffer(t *testing.T, n int) *memory.Buffer {
	t.Helper()
	b := memory.New("in", n+1, 20*time.Millisecond, nil)
	msgs := make([]isb.Message, n)
	for i := range msgs {
		msgs[i] = isb.Message{Value: []byte(strconv.Itoa(i))}
	}
	if err := b.Write(context.Background(), msgs, make([]error, n)); err != nil {
		t.Fatal(err)
	}
	return b
}

type harness struct {
	f       *Forwarder
	m       *Metrics
	tr      *Tracker
	in, out *memory.Buffer
	cancel  context.CancelFunc
	done    chan error
}

// start runs a forwarder of d and opts, with each of modes applied to opts
// after its defaults.
func start(t *testing.T, d Deps, opts Options, modes ...func(*Options)) *harness {
	t.Helper()
	h := &harness{tr: NewTracker(opts.Clock)} // the wall clock without one
	switch r := d.Reader.(type) {
	case *memory.Buffer:
		h.in = r
	case ackOnly:
		h.in = r.Reader.(*memory.Buffer)
	case *optionsReader:
		h.in = r.Buffer
	case noNack:
		h.in = r.b
	}
	if d.Sink == nil {
		h.out = memory.New("out", 1<<20, time.Millisecond, nil)
		d.Sink = h.out
	}
	h.m = NewMetrics(prometheus.NewRegistry(), h.tr)
	d.Metrics, d.Tracker = h.m, h.tr
	if opts.BatchSize == 0 {
		opts.BatchSize = 10
	}
	for _, mode := range modes {
		mode(&opts)
	}
	f, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.f = f
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- f.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
		h.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("forwarder did not stop")
	}
}

// waitReturned waits, at most 5 s, for Run to return after h.cancel, and
// fails the test when it returns an error.
func (h *harness) waitReturned(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
}

// waitAcked waits until the source has n messages acked.
func (h *harness) waitAcked(t *testing.T, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.in.WaitAcked(ctx, n); err != nil {
		t.Fatalf("acked %d of %d", h.in.Stats().Acked, n)
	}
}

// waitThrottled waits until the tracker reports exactly the reasons want.
func (h *harness) waitThrottled(t *testing.T, want ...ratelimit.Reason) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		changed := h.tr.Changed()
		if _, rs := h.tr.Throttled(); fmt.Sprint(rs) == fmt.Sprint(want) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			_, rs := h.tr.Throttled()
			t.Fatalf("throttled for %v; want %v", rs, want)
		}
	}
}

func TestForwardsEveryMessageOnceInOrder(t *testing.T) {
	h := start(t, Deps{Reader: filledBuffer(t, 95), Mapper: udf.Cat{}}, Options{})
	h.waitAcked(t, 95)
	h.stop(t) // the ack metric counts after the source has the ack
	got := h.out.Messages()
	if len(got) != 95 {
		t.Fatalf("sink has %d messages; want 95", len(got))
	}
	for i, m := range got {
		if string(m.Value) != strconv.Itoa(i) {
			t.Fatalf("message %d is %q", i, m.Value)
		}
	}
	if s := h.in.Stats(); s.InFlight != 0 || s.Pending != 0 {
		t.Fatalf("source %+v; want everything acked", s)
	}
	if r, w, a := testutil.ToFloat64(h.m.Read), testutil.ToFloat64(h.m.Written), testutil.ToFloat64(h.m.Acked); r != 95 || w != 95 || a != 95 {
		t.Fatalf("read %v written %v acked %v; want 95 each", r, w, a)
	}
}

// dropOdd drops messages whose value is odd.
type dropOdd struct{}

func (dropOdd) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	dropped := 0
	for _, m := range in {
		n, _ := strconv.Atoi(string(m.Value))
		if n%2 == 1 {
			dropped++
			continue
		}
		out = append(out, m)
	}
	return out, dropped, nil
}

// countingLimiter records grants and deposits.
type countingLimiter struct {
	mu                 sync.Mutex
	granted, deposited int
}

func (c *countingLimiter) Acquire(_ context.Context, n int) (ratelimit.Grant, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.granted += n
	return ratelimit.Grant{Tokens: n}, nil
}

func (c *countingLimiter) TryAcquire(n int) (ratelimit.Grant, ratelimit.Reason) {
	g, _ := c.Acquire(context.Background(), n)
	return g, ratelimit.NotThrottled
}

func (c *countingLimiter) Settle(g ratelimit.Grant, used int) ratelimit.Grant {
	used = min(max(used, 0), g.Tokens)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deposited += g.Tokens - used
	return ratelimit.GrantOf(used, g.Epoch())
}

func (c *countingLimiter) Epoch() (int64, time.Duration) { return 0, time.Second }

func (c *countingLimiter) FreshAfter(d, _ time.Duration) (time.Duration, int64) { return d, 0 }

func (c *countingLimiter) used() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.granted - c.deposited
}

func TestDroppedMessagesAndExcludeDropped(t *testing.T) { testDroppedMessagesAndExcludeDropped(t) }

func testDroppedMessagesAndExcludeDropped(t *testing.T, modes ...func(*Options)) {
	for _, exclude := range []bool{false, true} {
		t.Run(fmt.Sprint("excludeDropped=", exclude), func(t *testing.T) {
			lim := &countingLimiter{}
			h := start(t, Deps{Reader: filledBuffer(t, 40), Mapper: dropOdd{}, Throttle: &throttle.Throttle{Limiter: lim}}, Options{ExcludeDropped: exclude}, modes...)
			h.waitAcked(t, 40)
			h.stop(t)
			if n := len(h.out.Messages()); n != 20 {
				t.Fatalf("sink has %d; want the 20 even ones", n)
			}
			if d := testutil.ToFloat64(h.m.Dropped); d != 20 {
				t.Fatalf("dropped metric %v; want 20", d)
			}
			want := 40 // every message read uses a token
			if exclude {
				want = 20 // only the messages that reach the sink do
			}
			if got := lim.used(); got != want {
				t.Fatalf("tokens used %d; want %d", got, want)
			}
		})
	}
}

// flaky is a sink that fails the first failures writes of every message, then
// writes it to out; fallback marks messages whose value is in fallbackFor,
// and onSuccess writes those whose value it holds and answers ON_SUCCESS
// with a receipt.
type flaky struct {
	mu        sync.Mutex
	failures  int
	seen      map[string]int
	fallback  map[string]bool
	onSuccess map[string]bool
	out       *memory.Buffer
	err       error
}

func (s *flaky) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok []isb.Message
	for i, m := range msgs {
		v := string(m.Value)
		s.seen[v]++
		switch {
		case s.fallback[v]:
			errs[i] = fmt.Errorf("message %s: %w", v, isb.ErrFallback)
		case s.seen[v] <= s.failures:
			errs[i] = s.err
		case s.onSuccess[v]:
			ok = append(ok, m)
			errs[i] = &isb.OnSuccessError{Message: &isb.Message{Value: []byte("receipt " + v)}}
		default:
			ok = append(ok, m)
			errs[i] = nil
		}
	}
	return s.out.Write(ctx, ok, make([]error, len(ok)))
}

func newFlaky(failures int, fallback ...string) *flaky {
	fb := map[string]bool{}
	for _, v := range fallback {
		fb[v] = true
	}
	return &flaky{failures: failures, seen: map[string]int{}, fallback: fb,
		out: memory.New("sink", 1<<20, time.Millisecond, nil), err: errors.New("sink is down")}
}

func TestOnSuccessSink(t *testing.T) {
	t.Run("ON_SUCCESS to the on-success sink", func(t *testing.T) {
		sink := newFlaky(1)
		sink.onSuccess = map[string]bool{"2": true, "5": true}
		ons := memory.New("ons", 100, time.Millisecond, nil)
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, OnSuccess: ons},
			Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: 2 * time.Millisecond}})
		h.waitAcked(t, 10)
		got := ons.Messages()
		if n := len(sink.out.Messages()); n != 10 || len(got) != 2 || string(got[0].Value) != "receipt 2" || string(got[1].Value) != "receipt 5" {
			t.Fatalf("sink %d, on-success sink %v; want 10 and the receipts of 2 and 5", n, got)
		}
		if w, o := testutil.ToFloat64(h.m.Written), testutil.ToFloat64(h.m.OnSuccess); w != 8 || o != 2 {
			t.Fatalf("written %v, on success %v; want 8 and 2", w, o)
		}
	})
	t.Run("without an on-success sink, written", func(t *testing.T) {
		sink := newFlaky(0)
		sink.onSuccess = map[string]bool{"2": true}
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink}, Options{})
		h.waitAcked(t, 10)
		if w := testutil.ToFloat64(h.m.Written); w != 10 {
			t.Fatalf("written %v; want 10", w)
		}
	})
}

func TestSinkFailuresAreRetriedBeforeAck(t *testing.T) { testSinkFailuresAreRetriedBeforeAck(t) }

func testSinkFailuresAreRetriedBeforeAck(t *testing.T, modes ...func(*Options)) {
	sink := newFlaky(3)
	in := filledBuffer(t, 25)
	h := start(t, Deps{Reader: in, Sink: sink},
		Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: 2 * time.Millisecond}}, modes...)
	h.waitAcked(t, 25)
	if n := len(sink.out.Messages()); n != 25 {
		t.Fatalf("sink took %d; want all 25 after retries", n)
	}
	if e := testutil.ToFloat64(h.m.Errors.WithLabelValues(StageWrite)); e != 75 {
		t.Fatalf("write errors %v; want 3 per message", e)
	}
}

func TestFallbackSink(t *testing.T) { testFallbackSink(t) }

func testFallbackSink(t *testing.T, modes ...func(*Options)) {
	t.Run("FALLBACK from the sink", func(t *testing.T) {
		sink := newFlaky(0, "3", "7")
		fb := memory.New("fb", 100, time.Millisecond, nil)
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Fallback: fb}, Options{}, modes...)
		h.waitAcked(t, 10)
		if n, f := len(sink.out.Messages()), fb.Messages(); n != 8 || len(f) != 2 || string(f[0].Value) != "3" {
			t.Fatalf("sink %d, fallback %v; want 8 and [3 7]", n, f)
		}
		if v := testutil.ToFloat64(h.m.Fallback); v != 2 {
			t.Fatalf("fallback metric %v", v)
		}
	})
	t.Run("after the retry steps", func(t *testing.T) {
		sink := newFlaky(1 << 30)
		fb := memory.New("fb", 100, time.Millisecond, nil)
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Fallback: fb},
			Options{Retry: RetryPolicy{Interval: time.Millisecond, Steps: 3, OnFailure: Fallback}}, modes...)
		h.waitAcked(t, 10)
		if n := len(fb.Messages()); n != 10 {
			t.Fatalf("fallback has %d; want all 10", n)
		}
	})
	t.Run("drop after the retry steps", func(t *testing.T) {
		sink := newFlaky(1 << 30)
		h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink},
			Options{Retry: RetryPolicy{Interval: time.Millisecond, Steps: 2, OnFailure: Drop}}, modes...)
		h.waitAcked(t, 10)
		if d := testutil.ToFloat64(h.m.Dropped); d != 10 {
			t.Fatalf("dropped %v; want 10", d)
		}
	})
}

func TestDownstreamFullIsTracked(t *testing.T) { testDownstreamFullIsTracked(t) }

func testDownstreamFullIsTracked(t *testing.T, modes ...func(*Options)) {
	out := memory.New("out", 5, time.Millisecond, nil)
	h := start(t, Deps{Reader: filledBuffer(t, 20), Sink: out},
		Options{Retry: RetryPolicy{Interval: time.Millisecond, MaxInterval: time.Millisecond}}, modes...)
	h.waitThrottled(t, ratelimit.ReasonDownstreamFull)
	if s := h.in.Stats(); s.Acked != 0 {
		t.Fatalf("acked %d while the sink was full; want none of the blocked batch", s.Acked)
	}
	// Drain the sink: the forwarder resumes and finishes.
	for range 100 {
		if h.in.Stats().Acked == 20 {
			break
		}
		buf := make([]isb.ReadMessage, 5)
		n, _ := out.Read(context.Background(), buf)
		out.Ack(context.Background(), buf[:n])
	}
	h.waitAcked(t, 20)
	h.waitThrottled(t)
}

// blockingSink blocks every write until released.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
	wrote   atomic.Int64
}

func (b *blockingSink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	clear(errs)
	b.wrote.Add(int64(len(msgs)))
	return nil
}

func TestShutdownFinishesTheBatchInFlight(t *testing.T) {
	sink := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	in := filledBuffer(t, 100)
	h := start(t, Deps{Reader: in, Sink: sink}, Options{BatchSize: 10, ShutdownTimeout: 5 * time.Second})
	<-sink.entered
	h.cancel() // SIGTERM: stop reading; the batch being written must still be acked
	close(sink.release)
	h.waitReturned(t)
	s := in.Stats()
	if s.Acked != uint64(sink.wrote.Load()) || s.Acked != 10 || s.InFlight != 0 || s.Pending != 90 {
		t.Fatalf("after shutdown: %+v, sink wrote %d; want the one batch written and acked, the rest unread", s, sink.wrote.Load())
	}
}

// ackOnly is a reader that cannot nack.
type ackOnly struct{ isb.Reader }

// TestShutdownTimeoutBoundsAStuckSink checks that a batch the sink never takes
// is given up at the shutdown deadline, logged, and nacked when the reader can,
// so that it is read again at once.
func TestShutdownTimeoutBoundsAStuckSink(t *testing.T) { testShutdownTimeoutBoundsAStuckSink(t) }

func testShutdownTimeoutBoundsAStuckSink(t *testing.T, modes ...func(*Options)) {
	for _, tt := range []struct {
		name   string
		reader func(*memory.Buffer) isb.Reader
		want   memory.Stats
	}{
		{"nacked", func(b *memory.Buffer) isb.Reader { return b }, memory.Stats{Pending: 10}},
		{"reader cannot nack", func(b *memory.Buffer) isb.Reader { return ackOnly{b} }, memory.Stats{InFlight: 10}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
			in := filledBuffer(t, 10)
			core, logs := observer.New(zap.WarnLevel)
			h := start(t, Deps{Reader: tt.reader(in), Sink: sink, Logger: zap.New(core)},
				Options{ShutdownTimeout: 50 * time.Millisecond}, modes...)
			<-sink.entered
			h.cancel()
			select {
			case <-h.done:
				h.done <- nil
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after the shutdown timeout")
			}
			if s := in.Stats(); s.Acked != tt.want.Acked || s.InFlight != tt.want.InFlight || s.Pending != tt.want.Pending {
				t.Fatalf("stuck batch: %+v; want %+v", s, tt.want)
			}
			abandoned := logs.FilterMessageSnippet("batch not acked").FilterField(zap.String("stage", StageWrite))
			if abandoned.Len() != 1 {
				t.Fatalf("logged %v; want the batch given up at the write logged once", logs.All())
			}
		})
	}
}

// stuckLimiter has no tokens to give, for the reason it was made with, until the
// context of Acquire ends.
type stuckLimiter struct {
	reason  ratelimit.Reason
	tries   atomic.Int64
	waiting chan struct{}
}

func (s *stuckLimiter) TryAcquire(int) (ratelimit.Grant, ratelimit.Reason) {
	s.tries.Add(1)
	return ratelimit.Grant{}, s.reason
}

func (s *stuckLimiter) Acquire(ctx context.Context, _ int) (ratelimit.Grant, error) {
	s.waiting <- struct{}{}
	<-ctx.Done()
	return ratelimit.Grant{}, &ratelimit.ThrottledError{Reason: s.reason, Cause: ctx.Err()}
}

func (s *stuckLimiter) Settle(ratelimit.Grant, int) ratelimit.Grant { return ratelimit.Grant{} }

func (s *stuckLimiter) Epoch() (int64, time.Duration) { return 0, time.Second }

func (s *stuckLimiter) FreshAfter(d, _ time.Duration) (time.Duration, int64) { return d, 0 }

func TestForwarderWaitsForTheLimitersReason(t *testing.T) { testForwarderWaitsForTheLimitersReason(t) }

func testForwarderWaitsForTheLimitersReason(t *testing.T, modes ...func(*Options)) {
	for _, r := range []ratelimit.Reason{ratelimit.ReasonRateLimited, ratelimit.ReasonAwaitingAgreement, ratelimit.ReasonStoreUnavailable} {
		t.Run(r.String(), func(t *testing.T) {
			lim := &stuckLimiter{reason: r, waiting: make(chan struct{}, 1)}
			h := start(t, Deps{Reader: filledBuffer(t, 10), Throttle: &throttle.Throttle{Limiter: lim}}, Options{}, modes...)
			<-lim.waiting
			h.waitThrottled(t, r)
			h.stop(t)
			h.waitThrottled(t)
			if n := lim.tries.Load(); n != 1 {
				t.Fatalf("TryAcquire called %d times; want once before the wait", n)
			}
			if s := h.in.Stats(); s.Pending != 10 {
				t.Fatalf("source %+v; want nothing read without tokens", s)
			}
		})
	}
}

func TestThrottledForwarderReportsWhy(t *testing.T) { testThrottledForwarderReportsWhy(t) }

func testThrottledForwarderReportsWhy(t *testing.T, modes ...func(*Options)) {
	lim, err := ratelimit.New(ratelimit.Config{Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close(context.Background())
	h := start(t, Deps{Reader: filledBuffer(t, 1000), Throttle: &throttle.Throttle{Limiter: lim}}, Options{BatchSize: 100}, modes...)
	h.waitThrottled(t, ratelimit.ReasonRateLimited)
	h.stop(t)
	if s := h.in.Stats(); s.Acked > 10 {
		t.Fatalf("acked %d in at most two epochs of 5", s.Acked)
	}
	if got := testutil.ToFloat64(h.m.Granted) - testutil.ToFloat64(h.m.Deposited); got != float64(h.in.Stats().Acked) {
		t.Fatalf("tokens used %v; want one per message read (%d)", got, h.in.Stats().Acked)
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker(nil)
	if ok, _ := tr.Throttled(); ok {
		t.Fatal("new tracker throttled")
	}
	tr.Begin(ratelimit.ReasonDownstreamFull)
	tr.Begin(ratelimit.ReasonRateLimited)
	tr.Begin(ratelimit.ReasonRateLimited)
	tr.End(ratelimit.ReasonRateLimited)
	if ok, rs := tr.Throttled(); !ok || fmt.Sprint(rs) != "[rate_limited downstream_full]" {
		t.Fatalf("overlapping conditions: %v %v; want [rate_limited downstream_full]", ok, rs)
	}
	tr.End(ratelimit.ReasonRateLimited)
	tr.End(ratelimit.ReasonDownstreamFull)
	tr.End(ratelimit.ReasonDownstreamFull) // unmatched End is ignored
	if ok, _ := tr.Throttled(); ok {
		t.Fatal("still throttled after every End")
	}
}

func TestTracingSpansPerIteration(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	h := start(t, Deps{Reader: filledBuffer(t, 25), Tracer: tp.Tracer("test")}, Options{BatchSize: 10})
	h.waitAcked(t, 25)
	h.stop(t)
	read := 0
	for _, s := range rec.Ended() {
		if s.Name() != "forward" {
			t.Fatalf("span %q", s.Name())
		}
		for _, a := range s.Attributes() {
			if a.Key == "read" {
				read += int(a.Value.AsInt64())
			}
		}
	}
	if read != 25 {
		t.Fatalf("spans account for %d messages read; want 25", read)
	}
}

// TestShadowCountsOnlyWhatGoesOn reads 40 messages in one batch under a
// shadow limit of 10 a second, and drops the odd ones: with excludeDropped
// only the 20 that go on count, 10 of them beyond the limit; without, all 40
// read count, 30 beyond it.
func TestShadowCountsOnlyWhatGoesOn(t *testing.T) {
	for _, exclude := range []bool{false, true} {
		for _, mode := range keyedModes {
			t.Run(fmt.Sprint("excludeDropped=", exclude, "/", mode.name), func(t *testing.T) {
				clk := clock.NewManual(epochStart)
				lim, err := ratelimit.New(ratelimit.Config{Max: 10, Min: 10, Shadow: true}, ratelimit.WithClock(clk))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lim.Close(context.Background()) })
				opts := Options{BatchSize: 40, ExcludeDropped: exclude}
				mode.set(&opts)
				h := start(t, Deps{Reader: filledBuffer(t, 40), Mapper: dropOdd{}, Throttle: &throttle.Throttle{Limiter: lim.Gate()}}, opts)
				h.waitAcked(t, 40)
				h.stop(t)
				want := int64(30)
				if exclude {
					want = 10
				}
				if got := lim.Status().ShadowThrottled; got != want {
					t.Fatalf("shadow throttled %d; want %d", got, want)
				}
			})
		}
	}
}
