package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// config configures a source.
type config struct {
	count      *uint64          // the sequence number to end before; nil: no end
	start      uint64           // the first sequence number
	redelivery time.Duration    // how long a read message may go unacknowledged
	now        func() time.Time // the clock of redelivery deadlines and event times
	partition  int32
	dropEvery  uint64         // when positive, every dropEvery-th payload is "drop-<n>"
	readWait   *time.Duration // when set, caps how long a read waits for messages
	metadata   bool           // attach user metadata simplesource/seq = <n>
}

// source generates "0", "1", ... with at-least-once delivery. Its methods
// are safe for concurrent use.
type source struct {
	cfg config

	mu       sync.Mutex
	next     uint64               // the next sequence number never handed out
	inFlight map[uint64]time.Time // handed out, not acknowledged: redelivery deadline (zero: at once)
	wake     chan struct{}        // closed when a nack makes messages available at once
}

var (
	_ sourcer.Sourcer       = (*source)(nil)
	_ sourcer.OptionsNacker = (*source)(nil)
)

func newSource(cfg config) *source {
	return &source{cfg: cfg, next: cfg.start, inFlight: make(map[uint64]time.Time), wake: make(chan struct{})}
}

// Read hands out up to req.Count messages: first those due for redelivery,
// oldest first, then new ones. With none available it waits, up to
// req.Timeout (or the configured read wait, when shorter), for a nack without
// delay.
func (s *source) Read(ctx context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	wait := req.Timeout
	if s.cfg.readWait != nil {
		wait = min(wait, *s.cfg.readWait)
	}
	if wait <= 0 {
		s.send(s.takeNoWait(req.Count), out)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		seqs, wake := s.take(req.Count)
		if len(seqs) > 0 {
			s.send(seqs, out)
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			s.send(s.takeNoWait(req.Count), out) // deadlines may have passed meanwhile
			return
		case <-ctx.Done():
			return
		}
	}
}

func (s *source) takeNoWait(n uint64) []uint64 {
	seqs, _ := s.take(n)
	return seqs
}

// take marks up to n messages as handed out and returns their sequence
// numbers; with none, it returns the channel a Nack will close.
func (s *source) take(n uint64) ([]uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.now()
	var seqs []uint64
	for seq, deadline := range s.inFlight {
		if !deadline.After(now) {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	if uint64(len(seqs)) > n {
		seqs = seqs[:n]
	}
	for uint64(len(seqs)) < n && (s.cfg.count == nil || s.next < *s.cfg.count) {
		seqs = append(seqs, s.next)
		s.next++
	}
	for _, seq := range seqs {
		s.inFlight[seq] = now.Add(s.cfg.redelivery)
	}
	return seqs, s.wake
}

func (s *source) send(seqs []uint64, out chan<- sourcer.Message) {
	now := s.cfg.now()
	for _, seq := range seqs {
		off := []byte(strconv.FormatUint(seq, 10))
		v := off
		if s.cfg.dropEvery > 0 && seq%s.cfg.dropEvery == 0 {
			v = append([]byte("drop-"), off...)
		}
		m := sourcer.Message{
			Value:     v,
			Offset:    sourcer.Offset{Value: off, PartitionID: s.cfg.partition},
			EventTime: now,
		}
		if s.cfg.metadata {
			md := sourcer.NewUserMetadata()
			md.AddKV("simplesource", "seq", off)
			m = m.WithUserMetadata(md)
		}
		out <- m
	}
}

// Ack forgets the messages at offsets: they are never handed out again.
func (s *source) Ack(_ context.Context, offsets []sourcer.Offset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range offsets {
		if seq, err := strconv.ParseUint(string(o.Value), 10, 64); err == nil {
			delete(s.inFlight, seq)
		}
	}
}

// Nack makes the messages at offsets due for redelivery at once.
func (s *source) Nack(ctx context.Context, offsets []sourcer.Offset) {
	s.NackWithOptions(ctx, []sourcer.NackRequest{{Offsets: offsets}})
}

// NackWithOptions makes the messages of each request due for redelivery
// once the request's delay has passed: at once without a delay (and a Read
// waiting for messages is woken), else no sooner than the delay from now.
// Offsets of messages not in flight (acknowledged, or never read) are
// ignored.
func (s *source) NackWithOptions(_ context.Context, reqs []sourcer.NackRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.now()
	wake := false
	for _, r := range reqs {
		due := time.Time{} // at once
		if d := r.Options.DelayDuration(); d > 0 {
			due = now.Add(d)
		}
		for _, o := range r.Offsets {
			seq, err := strconv.ParseUint(string(o.Value), 10, 64)
			if _, ok := s.inFlight[seq]; err == nil && ok {
				s.inFlight[seq] = due
				wake = wake || due.IsZero()
			}
		}
	}
	if wake {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// Pending counts the messages neither acknowledged nor in flight: those not
// generated yet and those due for redelivery. It is unknown for a source
// without end.
func (s *source) Pending(context.Context) int64 {
	if s.cfg.count == nil {
		return sourcer.PendingUnknown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.now()
	n := *s.cfg.count - min(s.next, *s.cfg.count)
	for _, deadline := range s.inFlight {
		if !deadline.After(now) {
			n++
		}
	}
	return int64(n)
}

// Partitions is the replica's own partition.
func (s *source) Partitions(context.Context) []int32 { return []int32{s.cfg.partition} }
