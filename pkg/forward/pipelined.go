package forward

import (
	"context"
	"io"
	"sync"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// maxWorkers caps the batches a streaming forwarder maps at once.
const maxWorkers = 64

// pipelined reports whether the stages overlap.
func (f *Forwarder) pipelined() bool { return f.opts.Streaming || f.opts.ReadAhead }

// shape returns how many batches may be in flight at once, the most messages
// in flight and the most one read takes.
func (f *Forwarder) shape() (workers, inFlight, readSize int) {
	switch {
	case !f.pipelined():
		return 1, f.readSize(), f.readSize()
	case !f.opts.Streaming:
		return 2, 2 * f.readSize(), f.readSize()
	}
	c := f.opts.Concurrency
	readSize = min(f.opts.BatchSize, c)
	// Enough batches for the concurrency to be reached with reads of half
	// the largest size, which is what a limiter's grants and a busy
	// pipeline's freed slots often give.
	workers = min(maxWorkers, 2*((c+readSize-1)/readSize)+2)
	return workers, c, readSize
}

// forkWorkers returns n workers, the first with the forwarder's functions
// and the others with forks of them (udf.Forker). A function that cannot
// fork is shared by all, one batch at a time. closeForks closes the forks.
func (f *Forwarder) forkWorkers(n int) (workers []*worker, closeForks func()) {
	var forks []udf.Mapper
	fork := func(m udf.Mapper, shared *udf.Mapper) udf.Mapper {
		if m == nil {
			return nil
		}
		if fk, ok := m.(udf.Forker); ok {
			if c := fk.Fork(); c != nil {
				forks = append(forks, c)
				return c
			}
		}
		if *shared == nil {
			*shared = &serial{m: m}
		}
		return *shared
	}
	var sharedT, sharedM udf.Mapper
	for i := range n {
		if i == 0 {
			workers = append(workers, f.newWorker(f.d.Transformer, f.d.Mapper))
			continue
		}
		workers = append(workers, f.newWorker(fork(f.d.Transformer, &sharedT), fork(f.d.Mapper, &sharedM)))
	}
	if sharedT != nil {
		workers[0].transformer = sharedT
	}
	if sharedM != nil {
		workers[0].mapper = sharedM
	}
	return workers, func() {
		for _, m := range forks {
			if c, ok := m.(io.Closer); ok {
				c.Close()
			}
		}
	}
}

// serial is a Mapper that maps one batch at a time.
type serial struct {
	mu sync.Mutex
	m  udf.Mapper
}

func (s *serial) Map(ctx context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Map(ctx, in, out)
}

// slots counts the messages a pipelined forwarder may still have in flight.
// One goroutine takes them; any gives them back.
type slots struct {
	mu   sync.Mutex
	free int
	wake chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n, wake: make(chan struct{}, 1)} }

// take waits for a free slot, then takes as many as are free, up to most. It
// returns 0 when ctx is done first.
func (s *slots) take(ctx context.Context, most int) int {
	for {
		s.mu.Lock()
		if s.free > 0 {
			k := min(most, s.free)
			s.free -= k
			s.mu.Unlock()
			return k
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return 0
		}
	}
}

// give frees n slots.
func (s *slots) give(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// turns lets batches write and ack in the order they were read.
type turns struct {
	mu   sync.Mutex
	cond sync.Cond
	next uint64
}

// wait waits until it is seq's turn.
func (t *turns) wait(seq uint64) {
	t.mu.Lock()
	for t.next != seq {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// done ends the current turn.
func (t *turns) done() {
	t.mu.Lock()
	t.next++
	t.mu.Unlock()
	t.cond.Broadcast()
}
