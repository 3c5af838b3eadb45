package forward

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// pipelinedModes are the forwarders that overlap their stages.
var pipelinedModes = []struct {
	name string
	set  func(*Options)
}{
	{"streaming", func(o *Options) { o.Streaming, o.Concurrency = true, 3*o.BatchSize }},
	{"read-ahead", func(o *Options) { o.ReadAhead = true }},
}

// TestPipelinedForwardersPassTheSequentialTests runs the tests whose
// outcome does not depend on one batch being in flight at a time with each
// pipelined forwarder.
func TestPipelinedForwardersPassTheSequentialTests(t *testing.T) {
	tests := []struct {
		name string
		test func(t *testing.T, modes ...func(*Options))
	}{
		{"DroppedMessagesAndExcludeDropped", testDroppedMessagesAndExcludeDropped},
		{"SinkFailuresAreRetriedBeforeAck", testSinkFailuresAreRetriedBeforeAck},
		{"FallbackSink", testFallbackSink},
		{"DownstreamFullIsTracked", testDownstreamFullIsTracked},
		{"ShutdownTimeoutBoundsAStuckSink", testShutdownTimeoutBoundsAStuckSink},
		{"ForwarderWaitsForTheLimitersReason", testForwarderWaitsForTheLimitersReason},
		{"ThrottledForwarderReportsWhy", testThrottledForwarderReportsWhy},
		{"NackedByTheFunctionComesBackOnce", testNackedByTheFunctionComesBackOnce},
		{"NackedByTheSinkComesBackOnce", testNackedByTheSinkComesBackOnce},
		{"NackOptionsReachTheSource", testNackOptionsReachTheSource},
		{"MaxDeliveriesDropsWhenTheForwarderRedelivers", testMaxDeliveriesDropsWhenTheForwarderRedelivers},
		{"ThrottledSinkIsRetriedAfterItsRetryAfter", testThrottledSinkIsRetriedAfterItsRetryAfter},
		{"ThrottledAttemptsUseNoRetrySteps", testThrottledAttemptsUseNoRetrySteps},
		{"RejectedMessages", testRejectedMessages},
		{"ThrottledRetryTakesTokensAgain", testThrottledRetryTakesTokensAgain},
		{"FailedMessagesAreRetriedBeforeWrite", testFailedMessagesAreRetriedBeforeWrite},
		{"UnavailableAttemptsUseNoRetrySteps", testUnavailableAttemptsUseNoRetrySteps},
	}
	for _, mode := range pipelinedModes {
		t.Run(mode.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) { tt.test(t, mode.set) })
			}
		})
	}
}

// gate is a mapper that holds every batch until it is let through, and
// records how many messages it holds at once.
type gate struct {
	mu      sync.Mutex
	held    int
	most    int
	entered chan int // the size of each batch that comes in
	release chan struct{}
	hold    func(in []isb.Message) bool // which batches wait (nil: all)
}

func newGate() *gate {
	return &gate{entered: make(chan int, 1000), release: make(chan struct{})}
}

func (g *gate) Map(ctx context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	g.mu.Lock()
	g.held += len(in)
	g.most = max(g.most, g.held)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.held -= len(in)
		g.mu.Unlock()
	}()
	g.entered <- len(in)
	if g.hold == nil || g.hold(in) {
		select {
		case <-g.release:
		case <-ctx.Done():
			return out, 0, ctx.Err()
		}
	}
	return append(out, in...), 0, nil
}

func (g *gate) Fork() udf.Mapper { return g }

func (g *gate) mostHeld() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// waitHeld waits until the gate holds n messages in all.
func waitHeld(t *testing.T, g *gate, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for got := 0; got < n; {
		select {
		case k := <-g.entered:
			got += k
		case <-timeout:
			t.Fatalf("the map got %d messages; want %d", got, n)
		}
	}
}

func TestStreamingKeepsConcurrencyInFlight(t *testing.T) {
	g := newGate()
	in := filledBuffer(t, 200)
	h := start(t, Deps{Reader: in, Mapper: g}, Options{BatchSize: 10, Concurrency: 55, Streaming: true})
	waitHeld(t, g, 55) // 5 batches of 10 and one of 5, all mapped at once
	if s := in.Stats(); s.InFlight != 55 {
		t.Fatalf("source %+v; want 55 in flight", s)
	}
	close(g.release)
	h.waitAcked(t, 200)
	h.stop(t)
	if most := g.mostHeld(); most != 55 {
		t.Fatalf("the map held at most %d messages at once; want the concurrency, 55", most)
	}
	if n := len(h.out.Messages()); n != 200 {
		t.Fatalf("sink has %d messages; want 200", n)
	}
}

func TestSequentialReadsAtMostTheConcurrency(t *testing.T) {
	g := newGate()
	close(g.release)
	in := filledBuffer(t, 30)
	h := start(t, Deps{Reader: in, Mapper: g}, Options{BatchSize: 10, Concurrency: 4})
	h.waitAcked(t, 30)
	h.stop(t)
	if most := g.mostHeld(); most != 4 {
		t.Fatalf("the map held at most %d messages at once; want 4 (concurrency below readBatchSize)", most)
	}
}

func TestStreamingAcksOutOfOrder(t *testing.T) {
	g := newGate()
	// The first batch waits; the others go through.
	g.hold = func(in []isb.Message) bool { return string(in[0].Value) == "0" }
	in := filledBuffer(t, 100)
	h := start(t, Deps{Reader: in, Mapper: g}, Options{BatchSize: 10, Concurrency: 100, Streaming: true})
	h.waitAcked(t, 90) // everything but the first batch, while it is held
	if s := in.Stats(); s.InFlight != 10 {
		t.Fatalf("source %+v; want the first batch alone in flight", s)
	}
	close(g.release)
	h.waitAcked(t, 100)
	h.stop(t)
	got := h.out.Messages()
	if len(got) != 100 || string(got[90].Value) != "0" {
		t.Fatalf("sink has %d messages, the 91st %q; want 100, the held batch last", len(got), got[90].Value)
	}
}

func TestReadAheadKeepsTheOrder(t *testing.T) {
	g := newGate()
	// Every other batch waits, so a later batch is mapped first.
	g.hold = func(in []isb.Message) bool { n, _ := strconv.Atoi(string(in[0].Value)); return n%20 == 0 }
	in := filledBuffer(t, 100)
	h := start(t, Deps{Reader: in, Mapper: g}, Options{BatchSize: 10, ReadAhead: true})
	waitHeld(t, g, 20) // the held batch and the one read ahead of it
	if s := in.Stats(); s.InFlight != 20 {
		t.Fatalf("source %+v; want two batches in flight", s)
	}
	go func() {
		for range 5 {
			g.release <- struct{}{}
		}
	}()
	h.waitAcked(t, 100)
	h.stop(t)
	got := h.out.Messages()
	for i, m := range got {
		if string(m.Value) != strconv.Itoa(i) {
			t.Fatalf("message %d is %q; want read-ahead to keep the order", i, m.Value)
		}
	}
	if len(got) != 100 {
		t.Fatalf("sink has %d messages; want 100", len(got))
	}
}

func TestStreamingShutdownFinishesEveryBatchInFlight(t *testing.T) {
	g := newGate()
	in := filledBuffer(t, 100)
	h := start(t, Deps{Reader: in, Mapper: g},
		Options{BatchSize: 10, Concurrency: 40, Streaming: true, ShutdownTimeout: 5 * time.Second})
	waitHeld(t, g, 40)
	h.cancel() // SIGTERM: reads stop; the four batches in flight are finished
	close(g.release)
	h.waitReturned(t)
	s := in.Stats()
	if s.Acked != 40 || s.InFlight != 0 || s.Pending != 60 {
		t.Fatalf("after shutdown: %+v; want the 40 in flight written and acked, the rest unread", s)
	}
	if n := len(h.out.Messages()); n != 40 {
		t.Fatalf("sink has %d messages; want 40", n)
	}
}

// TestPipelinedForwardersUseOneTokenPerMessage checks that whatever is in
// flight, the tokens kept are exactly the messages read: each read takes its
// tokens before it and gives the unused back.
func TestPipelinedForwardersUseOneTokenPerMessage(t *testing.T) {
	modes := append(pipelinedModes, struct {
		name string
		set  func(*Options)
	}{"streaming-concurrency-below-batch", func(o *Options) { o.Streaming, o.Concurrency = true, 3 }})
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			lim := &countingLimiter{}
			in := memory.New("in", 1000, time.Millisecond, nil)
			opts := Options{BatchSize: 7}
			mode.set(&opts)
			h := start(t, Deps{Reader: in, Mapper: udf.Cat{}, Throttle: &throttle.Throttle{Limiter: lim}}, opts)
			// Written a few at a time, so that reads come up short.
			for i := range 50 {
				msgs := []isb.Message{{Value: []byte(strconv.Itoa(2 * i))}, {Value: []byte(strconv.Itoa(2*i + 1))}}
				if err := in.Write(context.Background(), msgs, make([]error, 2)); err != nil {
					t.Fatal(err)
				}
			}
			h.waitAcked(t, 100)
			h.stop(t)
			if used := lim.used(); used != 100 {
				t.Fatalf("%d tokens kept; want 100, one per message", used)
			}
			if g := testutil.ToFloat64(h.m.Granted); g != 100 {
				t.Fatalf("granted metric %v; want 100", g)
			}
			vals := make([]string, 0, 100)
			for _, m := range h.out.Messages() {
				vals = append(vals, string(m.Value))
			}
			slices.Sort(vals)
			if len(slices.Compact(vals)) != 100 {
				t.Fatalf("sink has %d distinct messages; want 100", len(vals))
			}
		})
	}
}

func TestPipelinedShapes(t *testing.T) {
	for _, tt := range []struct {
		opts                        Options
		workers, inFlight, readSize int
	}{
		{Options{BatchSize: 500, Concurrency: 500, ReadAhead: true}, 2, 1000, 500},
		{Options{BatchSize: 500, Concurrency: 100, ReadAhead: true}, 2, 200, 100},
		{Options{BatchSize: 500, Concurrency: 500, Streaming: true}, 4, 500, 500},
		{Options{BatchSize: 50, Concurrency: 500, Streaming: true}, 22, 500, 50},
		{Options{BatchSize: 500, Concurrency: 20, Streaming: true}, 4, 20, 20},
		{Options{BatchSize: 1, Concurrency: 1000, Streaming: true}, maxWorkers, 1000, 1},
	} {
		t.Run(fmt.Sprintf("%+v", tt.opts), func(t *testing.T) {
			f := &Forwarder{opts: tt.opts}
			w, n, r := f.shape()
			if w != tt.workers || n != tt.inFlight || r != tt.readSize {
				t.Fatalf("shape = %d workers, %d in flight, reads of %d; want %d, %d, %d", w, n, r, tt.workers, tt.inFlight, tt.readSize)
			}
		})
	}
}
