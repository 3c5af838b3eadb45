package forward

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// gatedReader is a buffer whose first read blocks until the gate opens, as a
// source that lost its connection does until it is back.
type gatedReader struct {
	*memory.Buffer
	gate, blocked chan struct{}
	once          sync.Once
}

func newGatedReader(b *memory.Buffer) *gatedReader {
	return &gatedReader{Buffer: b, gate: make(chan struct{}), blocked: make(chan struct{})}
}

func (r *gatedReader) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	r.once.Do(func() {
		close(r.blocked)
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
	})
	return r.Buffer.Read(ctx, buf)
}

// stallSink is an epochSink whose first write blocks until the gate opens,
// and is recorded in the epoch it returns in, as a sink that stalled and
// then took the messages.
type stallSink struct {
	*epochSink
	gate, blocked chan struct{}
	once          sync.Once
}

func (s *stallSink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.once.Do(func() {
		close(s.blocked)
		<-s.gate
	})
	return s.epochSink.Write(ctx, msgs, errs)
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestTokensAreSpentInTheirEpoch: a read that blocks across epoch
// boundaries and returns 3.5s later, or a write that stalls as long, never
// lets the sink take more than the limit in a second: the read's tokens are
// given back and the current epoch's taken, and the stalled write takes the
// tokens of the epoch it returned in, so that what is read next waits for
// the epoch after. Every message is written once.
func TestTokensAreSpentInTheirEpoch(t *testing.T) {
	for _, stall := range []string{"read", "write"} {
		for _, mode := range keyedModes {
			t.Run(stall+"/"+mode.name, func(t *testing.T) {
				clk := clock.NewManual(t0)
				lim, err := ratelimit.New(ratelimit.Config{Max: 10, Min: 10}, ratelimit.WithClock(clk))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lim.Close(context.Background()) })
				in := filledBuffer(t, 40)
				es := newEpochSink(clk)
				d := Deps{Reader: in, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{Limiter: lim}}
				var blocked, gate chan struct{}
				switch stall {
				case "read":
					r := newGatedReader(in)
					d.Reader, blocked, gate = r, r.blocked, r.gate
				case "write":
					s := &stallSink{epochSink: es, gate: make(chan struct{}), blocked: make(chan struct{})}
					d.Sink, blocked, gate = s, s.blocked, s.gate
				}
				opts := Options{BatchSize: 10, Clock: clk, MaxIdlePause: time.Millisecond}
				mode.set(&opts)
				h := start(t, d, opts)
				h.in = in
				waitClosed(t, blocked, "the "+stall+" to block")
				for range 7 { // 3.5s, tick by tick of the limiter
					clk.Advance(500 * time.Millisecond)
				}
				close(gate)
				es.waitFor(t, 10)
				for step := 0; step < 30 && h.in.Stats().Acked < 40; step++ {
					waitForClock(t, clk, lim)
					clk.Advance(time.Second)
				}
				h.waitAcked(t, 40)
				got, _ := es.perEpoch(t0.Unix())
				for i, n := range got {
					if n > 10 {
						t.Fatalf("epoch %d: %d written; limit 10 (per epoch: %v)", i, n, got)
					}
				}
				if sum(got) != 40 || got[3] != 10 {
					t.Fatalf("per epoch %v; want 10 in epoch 3, when the %s returned, and 40 in all", got, stall)
				}
				if n := testutil.ToFloat64(h.m.Retaken); n < 10 {
					t.Fatalf("retaken_total %v; want at least the 10 of the late %s", n, stall)
				}
			})
		}
	}
}

// waitForClock waits, at most 10s, until the forwarder waits on clk: for
// the limiter's next epoch, or on a timer of its own beside the limiter's.
func waitForClock(t *testing.T, clk *clock.Manual, lim *ratelimit.Limiter) {
	t.Helper()
	runtest.WaitFor(t, "the forwarder to wait on the clock", func() bool {
		return lim.Status().Waiting > 0 || clk.Pending() >= 2
	}, runtest.Within(10*time.Second))
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestLateReadGoesOnInParts: a read that returns late with more messages
// than the current epoch has tokens left sends them on in parts, each on
// tokens of the epoch it is written in.
func TestLateReadGoesOnInParts(t *testing.T) {
	for _, mode := range keyedModes {
		t.Run(mode.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			lim, err := ratelimit.New(ratelimit.Config{Max: 10, Min: 10}, ratelimit.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lim.Close(context.Background()) })
			in := filledBuffer(t, 10)
			r := newGatedReader(in)
			es := newEpochSink(clk)
			opts := Options{BatchSize: 10, Clock: clk, MaxIdlePause: time.Millisecond}
			mode.set(&opts)
			h := start(t, Deps{Reader: r, Mapper: udf.Cat{}, Sink: es, Throttle: &throttle.Throttle{Limiter: lim}}, opts)
			h.in = in
			waitClosed(t, r.blocked, "the read to block")
			clk.Advance(1200 * time.Millisecond)
			// Another caller took 6 of the new epoch's tokens.
			if g, _ := lim.TryAcquire(6); g.Tokens != 6 {
				t.Fatalf("TryAcquire(6) = %d", g.Tokens)
			}
			close(r.gate)
			es.waitFor(t, 4)
			waitForClock(t, clk, lim)
			clk.Advance(time.Second)
			h.waitAcked(t, 10)
			got, _ := es.perEpoch(t0.Unix())
			if fmt.Sprint(got) != "[0 4 6]" {
				t.Fatalf("per epoch %v; want [0 4 6]", got)
			}
			es.checkOrder(t)
		})
	}
}
