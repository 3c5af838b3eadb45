package forward

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/memory"
)

// orderedMap nacks, once each, the messages whose value is 3 mod 7, with a
// delay, and records the size of every batch it is given.
type orderedMap struct {
	mu    sync.Mutex
	seen  map[string]int
	sizes []int
}

func (f *orderedMap) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizes = append(f.sizes, len(in))
	for _, m := range in {
		v := string(m.Value)
		n, _ := strconv.Atoi(v)
		if f.seen[v]++; n%7 == 3 && f.seen[v] == 1 {
			out = append(out, isb.Message{ID: m.ID, Origin: m.Origin, Nack: &isb.NackOptions{Delay: 2 * time.Millisecond}})
			continue
		}
		out = append(out, m)
	}
	return out, 0, nil
}

// failingSink fails, the first time it sees each, the messages whose value
// is 5 mod 6, and writes the rest to out.
type failingSink struct {
	mu   sync.Mutex
	seen map[string]int
	out  *memory.Buffer
}

func (s *failingSink) Write(ctx context.Context, msgs []isb.Message, errs []error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok []isb.Message
	for i, m := range msgs {
		v := string(m.Value)
		n, _ := strconv.Atoi(v)
		if s.seen[v]++; n%6 == 5 && s.seen[v] == 1 {
			errs[i] = errors.New("sink unavailable")
			continue
		}
		errs[i] = nil
		ok = append(ok, m)
	}
	return s.out.Write(ctx, ok, make([]error, len(ok)))
}

// TestOrderedKeepsTheOrderThroughNacksAndRetries forwards 60 messages
// through a map that nacks some with a delay and a sink that fails others
// once, with a reader that takes nacked messages back, read-ahead on and a
// concurrency of 10: Ordered maps one message at a time, delivers the
// nacked again itself, and the sink gets the 60 in the order read.
func TestOrderedKeepsTheOrderThroughNacksAndRetries(t *testing.T) {
	in := filledBuffer(t, 60)
	mapper := &orderedMap{seen: map[string]int{}}
	sink := &failingSink{seen: map[string]int{}, out: memory.New("sink", 1<<20, time.Millisecond, nil)}
	h := start(t, Deps{Reader: in, Mapper: mapper, Sink: sink},
		Options{BatchSize: 10, Concurrency: 10, ReadAhead: true, Ordered: true})
	h.waitAcked(t, 60)
	h.stop(t)
	out := sink.out.Messages()
	if len(out) != 60 {
		t.Fatalf("sink has %d messages; want 60", len(out))
	}
	for i, m := range out {
		if string(m.Value) != strconv.Itoa(i) {
			t.Fatalf("message %d at the sink is %s; want %d (the order read)", i, m.Value, i)
		}
	}
	mapper.mu.Lock()
	defer mapper.mu.Unlock()
	for _, n := range mapper.sizes {
		if n != 1 {
			t.Fatalf("the map was given batches of %v; want one message at a time", mapper.sizes)
		}
	}
	if s := in.Stats(); s.Acked != 60 || s.Pending != 0 || s.InFlight != 0 {
		t.Errorf("source %+v; want 60 acked, nothing left", s)
	}
}
