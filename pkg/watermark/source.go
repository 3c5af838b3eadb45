package watermark

import (
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Source is the watermark of one source processor (one replica of a source
// vertex), computed from the event times it reads.
//
// Each partition (or reader, for a source without partitions) keeps a mark:
// the smallest event time of the last batch it read, taken as the smallest
// event time it will still read. The processor's watermark is the smallest
// mark less Config.MaxDelay, and never decreases. A partition that has never
// read anything holds nothing back; a slow partition holds the watermark at
// its mark until it reads newer data or goes idle.
//
// With Config.IdleSource, a partition that has read nothing for Threshold is
// idle: at most once every StepInterval, [Source.Watermark] moves its mark
// forward by IncrementBy, never past the clock's now, so the processor's
// watermark never passes now less MaxDelay. Reading a batch ends the idle
// spell; the watermark never goes back for it.
//
// Source is safe for concurrent use. The zero value is not usable; call
// [NewSource].
type Source struct {
	cfg   Config
	clock clock.Clock

	mu    sync.Mutex
	parts map[int32]*partitionMark
	wm    time.Time
}

// partitionMark is one partition's mark and its idle bookkeeping.
type partitionMark struct {
	mark     time.Time // smallest event time still to read
	lastRead time.Time // when the last non-empty batch was read
	lastStep time.Time // when idleness last moved mark; zero when not idle
}

// NewSource returns the watermark of a source processor for cfg, which it
// validates ([Config.Validate]). It takes [WithClock].
func NewSource(cfg Config, opts ...Option) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	if cfg.IdleSource != nil {
		idle := *cfg.IdleSource
		cfg.IdleSource = &idle
	}
	return &Source{cfg: cfg, clock: o.clock, parts: map[int32]*partitionMark{}, wm: None()}, nil
}

// Observe records a batch read from partition now, given the event times of
// its messages. A batch with no event times is not a read: it neither moves
// the mark nor ends idleness.
func (s *Source) Observe(partition int32, eventTimes ...time.Time) {
	if len(eventTimes) == 0 {
		return
	}
	low := eventTimes[0]
	for _, t := range eventTimes[1:] {
		if t.Before(low) {
			low = t
		}
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[partition]
	if p == nil {
		p = &partitionMark{}
		s.parts[partition] = p
	}
	p.mark, p.lastRead, p.lastStep = low, now, time.Time{}
}

// Remove forgets partition, e.g. one a consumer group has taken away from
// this reader, so that its mark no longer holds the watermark; the watermark
// does not go back. Removing an unknown partition does nothing.
func (s *Source) Remove(partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parts, partition)
}

// Watermark returns the processor's watermark at the clock's now, after
// moving the marks of idle partitions as Config.IdleSource says. It returns
// [None] before any partition has read an event time, and always when
// Config.Disabled is set.
func (s *Source) Watermark() time.Time {
	if s.cfg.Disabled {
		return None()
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var low time.Time
	found := false
	for _, p := range s.parts {
		s.stepIdle(p, now)
		if !found || p.mark.Before(low) {
			low, found = p.mark, true
		}
	}
	if found {
		if wm := low.Add(-s.cfg.MaxDelay); wm.After(s.wm) {
			s.wm = wm
		}
	}
	return s.wm
}

// stepIdle moves p's mark by IncrementBy when p has been idle for Threshold
// and StepInterval has passed since its last step, capped at now. s.mu is
// held.
func (s *Source) stepIdle(p *partitionMark, now time.Time) {
	idle := s.cfg.IdleSource
	if idle == nil || now.Sub(p.lastRead) < idle.Threshold {
		return
	}
	if !p.lastStep.IsZero() && now.Sub(p.lastStep) < idle.StepInterval {
		return
	}
	p.lastStep = now
	next := p.mark.Add(idle.IncrementBy)
	if next.After(now) {
		next = now
	}
	if next.After(p.mark) {
		p.mark = next
	}
}
