package watermark

import "time"

// Config is a pipeline's spec.watermark, as Numaflow defines it. The zero
// value is watermarks on, no delay and no idle-source advancement.
type Config struct {
	// Disabled turns watermarks off: a [Source] of a disabled config yields
	// [None] whatever it reads, so nothing is published and every vertex
	// downstream fetches None.
	Disabled bool
	// MaxDelay is how far behind the event times read a source's watermark
	// stays, so that data up to MaxDelay out of order is on time. Zero or
	// more; 0 by default.
	MaxDelay time.Duration
	// IdleSource, when set, advances the watermark of a source that reads
	// nothing; nil leaves it where the last data put it.
	IdleSource *IdleSource
}

// IdleSource is spec.watermark.idleSource: how a source that reads nothing
// moves its watermark forward.
type IdleSource struct {
	// Threshold is how long a partition reads nothing before it counts as
	// idle. Required: more than zero.
	Threshold time.Duration
	// StepInterval is the time between two steps while the partition stays
	// idle. 0, the default, steps at every [Source.Watermark].
	StepInterval time.Duration
	// IncrementBy is how far each step moves the partition's watermark.
	// Required: more than zero.
	IncrementBy time.Duration
}

// Validate checks the config and returns a [*ConfigError] for the first
// setting out of range.
func (c Config) Validate() error {
	if c.MaxDelay < 0 {
		return &ConfigError{Field: "maxDelay", Value: c.MaxDelay, Reason: "is negative"}
	}
	if c.IdleSource == nil {
		return nil
	}
	switch i := c.IdleSource; {
	case i.Threshold <= 0:
		return &ConfigError{Field: "idleSource.threshold", Value: i.Threshold, Reason: "must be more than 0"}
	case i.StepInterval < 0:
		return &ConfigError{Field: "idleSource.stepInterval", Value: i.StepInterval, Reason: "is negative"}
	case i.IncrementBy <= 0:
		return &ConfigError{Field: "idleSource.incrementBy", Value: i.IncrementBy, Reason: "must be more than 0"}
	}
	return nil
}
