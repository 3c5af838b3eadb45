package forward

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// failing is a function that fails (udf.Fail) each message whose value is
// even the first fails times it sees it, and passes the others through.
// calls counts the calls of each message, and at holds the clock's time of
// each call of the message "0".
type failing struct {
	fails int
	clk   clock.Clock

	mu    sync.Mutex
	calls map[string]int
	at    []time.Time
}

func newFailing(fails int, clk clock.Clock) *failing {
	return &failing{fails: fails, clk: clk, calls: map[string]int{}}
}

func (f *failing) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range in {
		v := string(m.Value)
		f.calls[v]++
		if v == "0" && f.clk != nil {
			f.at = append(f.at, f.clk.Now())
		}
		if n, _ := strconv.Atoi(v); n%2 == 0 && f.calls[v] <= f.fails {
			out = append(out, udf.Fail(m))
			continue
		}
		out = append(out, m)
	}
	return out, 0, nil
}

func (f *failing) callsOf(v string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[v]
}

// newApplier returns a forwarder on clk for calling apply directly.
func newApplier(t *testing.T, clk clock.Clock) *Forwarder {
	t.Helper()
	f, err := New(Deps{Reader: filledBuffer(t, 0), Sink: filledBuffer(t, 0), Metrics: NewMetrics(prometheus.NewRegistry(), NewTracker(clk)),
		Tracker: NewTracker(clk)}, Options{BatchSize: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func batchOf(n int) []isb.Message {
	in := make([]isb.Message, n)
	for i := range in {
		in[i] = isb.Message{ID: strconv.Itoa(i), Value: []byte(strconv.Itoa(i)), Origin: i, Tags: []string{"t"}}
	}
	return in
}

// TestFunctionRetryWaitsAsTheBackoffSays fails message 0 three times and
// checks, on the manual clock, that each retry waits between half and the
// whole of interval × factor^retry, capped: 100ms, 300ms, then the 500ms cap.
func TestFunctionRetryWaitsAsTheBackoffSays(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	f := newApplier(t, clk)
	fn := newFailing(3, clk)
	p := RetryPolicy{Interval: 100 * time.Millisecond, MaxInterval: 500 * time.Millisecond, Factor: 3, OnFailure: Drop, Steps: 5}.normal()
	type result struct {
		out     []isb.Message
		dropped int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		out, dropped, err := f.apply(context.Background(), StageMap, fn, p, batchOf(3), nil)
		done <- result{out, dropped, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for retry, full := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond} {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("retry %d: no wait began", retry+1)
		}
		if got := fn.callsOf("0"); got != retry+1 {
			t.Fatalf("before retry %d: %d calls of message 0; want %d", retry+1, got, retry+1)
		}
		clk.Advance(full/2 - time.Nanosecond) // less than the shortest wait
		if clk.Pending() != 1 || fn.callsOf("0") != retry+1 {
			t.Fatalf("retry %d came before half its wait (%v)", retry+1, full/2)
		}
		clk.Advance(full/2 + time.Nanosecond) // the longest wait
	}
	r := <-done
	if r.err != nil || r.dropped != 0 {
		t.Fatalf("apply = %d dropped, %v", r.dropped, r.err)
	}
	if fn.callsOf("0") != 4 || fn.callsOf("2") != 4 || fn.callsOf("1") != 1 {
		t.Fatalf("calls = %v; want 4 of each even message, 1 of the odd", fn.calls)
	}
	if len(r.out) != 3 {
		t.Fatalf("out = %v; want the 3 messages", r.out)
	}
	for i, m := range r.out {
		if m.Origin != i || string(m.Value) != strconv.Itoa(i) || len(m.Tags) != 1 || m.Tags[0] != "t" {
			t.Errorf("out[%d] = %+v; want message %d in order, with its own tags alone", i, m, i)
		}
	}
	for i := 1; i < len(fn.at); i++ {
		if d := fn.at[i].Sub(fn.at[i-1]); d > 500*time.Millisecond {
			t.Errorf("wait %d = %v; want at most the cap", i, d)
		}
	}
}

// TestFunctionRetryDropsAfterSteps fails the even messages for ever: with
// onFailure drop and 3 steps each is called 4 times, then dropped; with
// retry they are called until the context ends.
func TestFunctionRetryDropsAfterSteps(t *testing.T) {
	f := newApplier(t, clock.Real())
	fn := newFailing(1<<30, nil)
	p := RetryPolicy{Interval: time.Microsecond, Steps: 3, OnFailure: Drop}.normal()
	out, dropped, err := f.apply(context.Background(), StageTransform, fn, p, batchOf(5), nil)
	if err != nil || dropped != 3 {
		t.Fatalf("apply = %d dropped, %v; want 3 dropped", dropped, err)
	}
	for _, v := range []string{"0", "2", "4"} {
		if got := fn.callsOf(v); got != 4 {
			t.Errorf("message %s: %d calls; want 1 and 3 retries", v, got)
		}
	}
	if len(out) != 2 || string(out[0].Value) != "1" || string(out[1].Value) != "3" {
		t.Errorf("out = %v; want the odd messages", out)
	}
	if got := testutil.ToFloat64(f.d.Metrics.Failed.WithLabelValues(StageTransform)); got != 12 {
		t.Errorf("failed = %v; want 12 (3 messages, 4 calls each)", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	fn = newFailing(1<<30, nil)
	p = RetryPolicy{Interval: time.Microsecond, MaxInterval: time.Microsecond, Steps: 3, OnFailure: Retry}.normal()
	done := make(chan error, 1)
	go func() {
		_, _, err := f.apply(ctx, StageMap, fn, p, batchOf(1), nil)
		done <- err
	}()
	for fn.callsOf("0") < 50 {
		select {
		case err := <-done:
			t.Fatalf("apply returned after %d calls: %v; want retries past the steps", fn.callsOf("0"), err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("apply after cancel = %v; want context.Canceled", err)
	}
}

// TestFailedMessagesAreRetriedBeforeWrite runs a forwarder whose map fails
// the even messages twice: every message is written once and acked, none
// with the fail tag; with onFailure drop and 1 step the even ones are
// dropped instead, and acked.
func TestFailedMessagesAreRetriedBeforeWrite(t *testing.T) {
	testFailedMessagesAreRetriedBeforeWrite(t)
}

func testFailedMessagesAreRetriedBeforeWrite(t *testing.T, modes ...func(*Options)) {
	for _, tt := range []struct {
		name    string
		p       RetryPolicy
		written int
	}{
		{"retry", RetryPolicy{Interval: time.Millisecond}, 20},
		{"drop", RetryPolicy{Interval: time.Millisecond, Steps: 1, OnFailure: Drop}, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFailing(2, nil)
			h := start(t, Deps{Reader: filledBuffer(t, 20), Mapper: fn}, Options{MapRetry: tt.p}, modes...)
			h.waitAcked(t, 20)
			h.stop(t)
			msgs := h.out.Messages()
			if len(msgs) != tt.written {
				t.Fatalf("written = %d; want %d", len(msgs), tt.written)
			}
			seen := map[string]int{}
			for _, m := range msgs {
				seen[string(m.Value)]++
				if udf.Failed(&m) {
					t.Errorf("message %s written with the fail tag", m.Value)
				}
			}
			for v, n := range seen {
				if n != 1 {
					t.Errorf("message %s written %d times", v, n)
				}
			}
			wantCalls := 3
			if tt.p.OnFailure == Drop {
				wantCalls = 2
			}
			if got := fn.callsOf("4"); got != wantCalls {
				t.Errorf("message 4 called %d times; want %d", got, wantCalls)
			}
			if got, want := testutil.ToFloat64(h.m.Dropped), float64(20-tt.written); got != want {
				t.Errorf("dropped = %v; want %v", got, want)
			}
		})
	}
}
