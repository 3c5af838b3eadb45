package forward

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// signals records what Deps.Signal is called with.
type signals struct {
	mu  sync.Mutex
	got []string
}

func (s *signals) record(kind isb.SignalKind, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, fmt.Sprint(kind, " ", retryAfter))
}

func (s *signals) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// TestSinkSignalsOncePerAttemptAndKind: a sink that refuses a batch of 10
// with 429s of two waits and a 503 gives Deps.Signal one call per kind, with
// the longest wait of the kind, for that attempt, and none once it writes.
func TestSinkSignalsOncePerAttemptAndKind(t *testing.T) {
	clk := clock.NewManual(t0)
	sink := newAnswering(func(attempt int) error { return nil })
	n := 0
	sink.answer = func(attempt int) error {
		if attempt > 1 {
			return nil
		}
		n++ // under the sink's lock: the messages of the first write, in order
		switch {
		case n <= 3:
			return &isb.ThrottledError{RetryAfter: time.Second, Signal: isb.SignalHTTP429}
		case n <= 6:
			return &isb.ThrottledError{RetryAfter: 2 * time.Second, Signal: isb.SignalHTTP429}
		case n == 7:
			return &isb.ThrottledError{Signal: isb.SignalHTTP503}
		}
		return nil
	}
	sink.wrote = make(chan int, 10)
	var sig signals
	h := start(t, Deps{Reader: filledBuffer(t, 10), Sink: sink, Throttle: &throttle.Throttle{Signal: sig.record}}, Options{Clock: clk})
	receive(t, sink.wrote)
	blockUntil(t, clk, 1)
	clk.Advance(2 * time.Second)
	receive(t, sink.wrote)
	h.waitAcked(t, 10)
	h.stop(t)
	if got, want := fmt.Sprint(sig.list()), "[http429 2s http503 0s]"; got != want {
		t.Errorf("signals %s; want %s", got, want)
	}
}

// rateLimitedOnce is a function that hands every message back the first time
// it sees it, rate limited with a wait of its value in milliseconds.
type rateLimitedOnce struct {
	mu   sync.Mutex
	seen map[string]int
}

func (f *rateLimitedOnce) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range in {
		f.seen[string(m.Value)]++
		if f.seen[string(m.Value)] == 1 {
			var ms int
			fmt.Sscan(string(m.Value), &ms)
			out = append(out, isb.Message{ID: m.ID, Origin: m.Origin,
				Nack: &isb.NackOptions{RateLimited: true, Delay: time.Duration(ms) * time.Millisecond}})
			continue
		}
		out = append(out, m)
	}
	return out, 0, nil
}

// TestMapSignalsOncePerBatch: a function that hands a batch back rate
// limited gives Deps.Signal one mapRateLimited call with the longest delay,
// and plain nacks none.
func TestMapSignalsOncePerBatch(t *testing.T) {
	var sig signals
	h := start(t, Deps{Reader: filledBuffer(t, 5), Mapper: &rateLimitedOnce{seen: map[string]int{}}, Throttle: &throttle.Throttle{Signal: sig.record}},
		Options{BatchSize: 5})
	h.waitAcked(t, 5)
	h.stop(t)
	checkOnce(t, h.out.Messages(), 5)
	if got, want := fmt.Sprint(sig.list()), "[mapRateLimited 4ms]"; got != want {
		t.Errorf("signals %s; want %s", got, want)
	}

	sig = signals{}
	h = start(t, Deps{Reader: filledBuffer(t, 5), Mapper: &nackOnce{seen: map[string]int{}}, Throttle: &throttle.Throttle{Signal: sig.record}},
		Options{BatchSize: 5})
	h.waitAcked(t, 5)
	h.stop(t)
	if got := sig.list(); len(got) != 0 {
		t.Errorf("plain nacks gave signals %v", got)
	}
}
