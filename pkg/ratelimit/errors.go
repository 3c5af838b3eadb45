package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrRateLimited is matched by every [*ThrottledError]: the caller asked for
	// tokens and none could be granted before its deadline.
	ErrRateLimited = errors.New("rate limited")
	// ErrAwaitingAgreement is matched by a [*ThrottledError] whose reason is that the
	// replicas have not yet agreed on a replica count that includes this replica.
	ErrAwaitingAgreement = errors.New("awaiting agreement on the replicas")
	// ErrStoreUnavailable is matched by a [*ThrottledError] whose reason is that the
	// store cannot be reached and the replica's lease has run out.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrClosed is returned by calls on a closed [Limiter].
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrInvalidConfig is matched by every [*FieldError].
	ErrInvalidConfig = errors.New("ratelimit: invalid config")
	// ErrNotLive is matched by an error that refuses a change of a setting
	// that is not live ([Field.Live]): a [*NotLiveError] from
	// [Limiter.Update], and a reloaded config's that names the setting by its
	// path.
	ErrNotLive = errors.New("needs a restart")
)

// Reason says why a replica is throttled.
type Reason uint8

const (
	// NotThrottled means tokens are available.
	NotThrottled Reason = iota
	// ReasonRateLimited means this epoch's share is used up.
	ReasonRateLimited
	// ReasonAwaitingAgreement means the replica waits for the replicas to agree on it.
	ReasonAwaitingAgreement
	// ReasonStoreUnavailable means the store is down and the lease has run out.
	ReasonStoreUnavailable
	// ReasonDownstreamFull means the sink or the next buffer is full. A Limiter
	// never reports it: the forwarder's write step (package forward) reports
	// it to its Tracker while a write fails with isb.ErrBufferFull and is
	// retried, so that its time counts in throttledSeconds and
	// sluice_ratelimit_throttled_seconds_total beside the limiter's reasons.
	ReasonDownstreamFull
	// ReasonDownstreamThrottled means the sink refused messages because it is
	// rate limited, and the forwarder waits as long as it asked (an HTTP
	// Retry-After). An adaptive Limiter reports it while a throttle signal's
	// Retry-After pauses it.
	ReasonDownstreamThrottled
)

var reasonNames = [...]string{
	NotThrottled:              "none",
	ReasonRateLimited:         "rate_limited",
	ReasonAwaitingAgreement:   "awaiting_agreement",
	ReasonStoreUnavailable:    "store_unavailable",
	ReasonDownstreamFull:      "downstream_full",
	ReasonDownstreamThrottled: "downstream_throttled",
}

// String returns the reason as used in metric labels: none, rate_limited,
// awaiting_agreement, store_unavailable, downstream_full, downstream_throttled.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// ThrottledError is returned by Acquire when no token can be granted before the
// context's deadline. It says why and how long until tokens may be available.
type ThrottledError struct {
	Reason Reason
	// Wait is the time from the call until the next epoch (or pacing slice) at which
	// tokens may be granted.
	Wait time.Duration
	// Cause is the context error when the wait was cut short, or nil when Acquire
	// failed fast because the deadline was before the next epoch.
	Cause error
}

func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("rate limited (%s): retry in %v", e.Reason, e.Wait)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is matches [ErrRateLimited] always, and [ErrAwaitingAgreement] or
// [ErrStoreUnavailable] by reason.
func (e *ThrottledError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return true
	case ErrAwaitingAgreement:
		return e.Reason == ReasonAwaitingAgreement
	case ErrStoreUnavailable:
		return e.Reason == ReasonStoreUnavailable
	}
	return false
}

// Unwrap returns the context error, if any.
func (e *ThrottledError) Unwrap() error { return e.Cause }
