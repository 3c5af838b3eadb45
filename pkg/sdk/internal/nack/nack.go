// Package nack holds Options, the options of a negative acknowledgement,
// which the SDK packages re-export as NackOptions, the tag that marks a map
// or transformer result as a nack, and their protocol conversions.
package nack

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
)

// Tag is the tag that marks a map or transformer result as a negative
// acknowledgement of its input: the literal text "U+005C__NACK__" (the code
// point of a backslash written out, then "__NACK__"), as Numaflow's protocol
// has it, next to the drop tag "U+005C__DROP__".
const Tag = "U+005C__NACK__"

// RateLimitedTag is the tag that marks a map result as a throttle signal:
// the function could not handle its input because what it calls is rate
// limited. The runtime hands the input back like a nack, after the
// options' delay (the Retry-After), and counts the signal. It is sluice's
// own, in the style of Tag.
const RateLimitedTag = "U+005C__RATE_LIMITED__"

// RateLimitedMarker begins the error message of a sink's failure that is a
// throttle signal; see FormatRateLimited.
const RateLimitedMarker = RateLimitedTag

// FormatRateLimited returns the error message of a sink's failure because
// what it writes to is rate limited: the marker, " retry-after=" and the
// wait when it is positive, and ": " and the reason when there is one.
func FormatRateLimited(retryAfter time.Duration, reason string) string {
	s := RateLimitedMarker
	if retryAfter > 0 {
		s += " retry-after=" + retryAfter.String()
	}
	if reason != "" {
		s += ": " + reason
	}
	return s
}

// RetryAfter returns options whose delay is retryAfter, in whole
// milliseconds rounded up; nil when retryAfter is not positive.
func RetryAfter(retryAfter time.Duration) *Options {
	if retryAfter <= 0 {
		return nil
	}
	ms := uint64((retryAfter + time.Millisecond - 1) / time.Millisecond)
	return &Options{Delay: &ms}
}

// Options tell the runtime how to redeliver a message that a function or
// sink negatively acknowledged (nacked). Every field is optional: nil (or an
// empty NackMap) means unset, and the runtime's defaults apply. A nil
// *Options sets nothing.
type Options struct {
	// Delay is how long, in milliseconds, to wait before the message is
	// delivered again.
	Delay *uint64
	// MaxDeliveries caps how many times the runtime delivers the message.
	MaxDeliveries *uint32
	// Reason says why the message was nacked, for logs.
	Reason *string
	// NackMap holds free-form values for whoever handles the nack (a
	// user-defined source gets them with the offsets).
	NackMap map[string]string
}

// DelayDuration is the delay as a time.Duration; zero when o or its Delay
// is nil.
func (o *Options) DelayDuration() time.Duration {
	if o == nil || o.Delay == nil {
		return 0
	}
	return time.Duration(*o.Delay) * time.Millisecond
}

// ToProto converts o to the protocol's NackOptions; nil stays nil, so that
// the field is not sent. The result shares o's pointers and map.
func ToProto(o *Options) *common.NackOptions {
	if o == nil {
		return nil
	}
	return &common.NackOptions{Reason: o.Reason, MaxDeliveries: o.MaxDeliveries, Delay: o.Delay, NackMap: o.NackMap}
}

// FromProto converts the protocol's NackOptions; nil stays nil. The result
// shares p's pointers and map.
func FromProto(p *common.NackOptions) *Options {
	if p == nil {
		return nil
	}
	return &Options{Delay: p.Delay, MaxDeliveries: p.MaxDeliveries, Reason: p.Reason, NackMap: p.NackMap}
}
