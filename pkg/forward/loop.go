package forward

import (
	"context"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// loop is the reading side of a forwarder, the same in every mode: it takes
// a batch's slots and tokens, reads at most that many messages, gives the
// unused tokens back at once, and hands the batch to a worker that maps,
// writes and acks it. A sequential forwarder's one worker runs in the
// loop's goroutine, so one batch is in flight at a time; a pipelined one's
// workers run in goroutines of their own, up to Concurrency messages in
// flight (see Options). Only the loop's goroutine takes tokens and reads, so
// the limit holds the same however many batches are in flight.
type loop struct {
	f        *Forwarder
	hard     context.Context
	slots    *slots
	free     chan *job
	readSize int
	seq      uint64
	// dry is whether the last read that had tokens came back empty: the
	// next read takes one token, not a batch's (see step).
	dry bool

	inline *worker   // a sequential forwarder's worker; nil when pipelined
	jobs   chan *job // to the workers of a pipelined forwarder
	order  *turns    // with ReadAhead: writes and acks in read order
	wg     sync.WaitGroup
}

// job is a batch in flight.
type job struct {
	read  []isb.ReadMessage // its buffer, readSize long
	batch []isb.ReadMessage
	tok   throttle.Tokens // its tokens, kept one a message (see throttle.Throttle.Send)
	start time.Time
	seq   uint64
}

// newLoop returns f's loop, its workers started; the batches it hands over
// are written and acked under hard. stop waits for the workers to finish
// the batches in flight and closes the forks of the functions.
func (f *Forwarder) newLoop(hard context.Context) (l *loop, stop func()) {
	n, inFlight, readSize := f.shape()
	l = &loop{f: f, hard: hard, slots: newSlots(inFlight), free: make(chan *job, n+1), readSize: readSize}
	for range n + 1 {
		l.free <- &job{read: make([]isb.ReadMessage, readSize)}
	}
	if !f.pipelined() {
		l.inline = f.newWorker(f.d.Transformer, f.d.Mapper)
		return l, func() {}
	}
	if !f.opts.Streaming {
		l.order = &turns{}
		l.order.cond.L = &l.order.mu
	}
	l.jobs = make(chan *job)
	workers, closeForks := f.forkWorkers(n)
	for _, w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for j := range l.jobs {
				w.forward(hard, j.tok, j.batch, j.start, l.order, j.seq)
				l.done(j, true)
			}
		}()
	}
	return l, func() {
		close(l.jobs)
		l.wg.Wait()
		closeForks()
	}
}

// run forwards until ctx is done, then lets the batches in flight finish
// under hard. It returns an error only when the forwarder cannot go on.
func (f *Forwarder) run(ctx, hard context.Context) error {
	l, stop := f.newLoop(hard)
	defer stop()
	for ctx.Err() == nil {
		if err := l.step(ctx); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// step reads one batch and hands it over: take its slots, then its tokens
// (waiting for both), read, give back the unused tokens, and send the batch
// on with tokens of the epoch it goes on in (see throttle.Throttle.Send). After an empty
// read it pauses instead (see Options.MaxIdlePause). It returns the
// limiter's error, or ctx's when ctx ends before the read.
func (l *loop) step(ctx context.Context) error {
	f := l.f
	j := <-l.free // one more than the workers: never waits long
	if f.keys != nil {
		f.keys.Wait(ctx, f.nackKeys) // a full hold makes room, or reads nothing new
	}
	k := l.slots.take(ctx, l.readSize)
	if k == 0 {
		l.free <- j
		return ctx.Err()
	}
	// A dry reader's read takes one token: it may wait its read timeout
	// across the end of the epoch, with whatever it took, which is lost
	// with the epoch; a batch's tokens would be that much of the replica's
	// share (all of it, when the share is smaller) neither used nor lent
	// to the busy replicas of its limits and groups, every second. The
	// read that finds the next message takes a batch again after it.
	want := k
	if l.dry {
		want = 1
	}
	tok, err := f.th.Take(ctx, want) // message and group tokens, before the read
	if err != nil {
		l.slots.give(k)
		l.free <- j
		return err
	}
	start := time.Now()
	batch := f.readBatch(ctx, j.read[:tok.N()])
	l.slots.give(k - len(batch))
	if tok.N() > 0 {
		l.dry = len(batch) == 0
	}
	// Its bytes and cost, known now: a wait for them may make the read's
	// tokens stale, which Send then renews.
	tok, ok := f.th.Pay(l.hard, tok, batch)
	switch {
	case len(batch) == 0:
		l.free <- j
		f.idle.wait(ctx) // a dry reader is not spun on
		return nil
	case !ok:
		f.abandon(l.hard, "acquire", batch, l.hard.Err())
		l.slots.give(len(batch))
		l.free <- j
		return nil
	}
	// The read's tokens, or the current epoch's when it returned in a later
	// one: then the batch may go on in parts, each a job.
	next := j
	unsent := f.th.Send(l.hard, tok, batch, func(tok throttle.Tokens, part []isb.ReadMessage) {
		if next == nil {
			next = <-l.free
		}
		if &next.read[0] != &part[0] {
			part = next.read[:copy(next.read, part)]
		}
		next.batch, next.tok, next.start, next.seq = part, tok, start, l.seq
		l.seq++
		l.dispatch(next)
		next = nil
	})
	if next != nil {
		l.free <- next
	}
	if len(unsent) > 0 {
		// Never handed over: hard ended before they had tokens.
		f.abandon(l.hard, "acquire", unsent, l.hard.Err())
		l.slots.give(len(unsent))
	}
	return nil
}

// dispatch hands j to a worker: at once in the loop's goroutine for a
// sequential forwarder, else to the first free worker.
func (l *loop) dispatch(j *job) {
	if l.inline == nil {
		l.jobs <- j
		return
	}
	l.inline.forward(l.hard, j.tok, j.batch, j.start, nil, 0)
	l.done(j, false)
}

// done frees j's slots and j itself; a pipelined job lets go of its
// payloads first (a sequential one's are overwritten by the next read).
func (l *loop) done(j *job, clearIt bool) {
	l.slots.give(len(j.batch))
	if clearIt {
		clear(j.batch)
	}
	l.free <- j
}
