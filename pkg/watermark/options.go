package watermark

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

const (
	// DefaultHeartbeatInterval is how often a [Publisher] running [Publisher.Run]
	// refreshes its entries' heartbeats.
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultTimeout is how old a heartbeat may be before a [Fetcher] drops the
	// processor from the minimum: ten heartbeats.
	DefaultTimeout = 10 * DefaultHeartbeatInterval
)

// Option configures a [Source], [Publisher] or [Fetcher]; each takes the
// options that concern it and ignores the others.
type Option func(*options)

type options struct {
	clock     clock.Clock
	heartbeat time.Duration
	timeout   time.Duration
	onError   func(error)
}

func buildOptions(opts []Option) options {
	o := options{clock: clock.Real(), heartbeat: DefaultHeartbeatInterval, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock sets the clock that tells the time of reads, heartbeats and
// timeouts; the wall clock ([clock.Real]) without it.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithHeartbeatInterval sets how often [Publisher.Run] refreshes the
// publisher's heartbeats ([DefaultHeartbeatInterval] without it; values of
// zero or less are ignored).
func WithHeartbeatInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.heartbeat = d
		}
	}
}

// WithTimeout sets how old a processor's heartbeat may be before a
// [Fetcher] drops it from the minimum ([DefaultTimeout] without it; values of
// zero or less are ignored). It must be several heartbeat intervals, plus
// the largest difference between the clocks of publishers and fetchers.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithErrorHandler sets a function [Publisher.Run] calls with each failed
// heartbeat; without it such errors are dropped and the next heartbeat tries
// again.
func WithErrorHandler(f func(error)) Option {
	return func(o *options) { o.onError = f }
}
