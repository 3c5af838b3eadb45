package sinkclient

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// RateLimitedMarker begins the error message of a message a user-defined sink
// failed because what it writes to is rate limited: the literal text
// "U+005C__RATE_LIMITED__", in the style of Numaflow's "U+005C__NACK__" tag.
// After it, both optional: " retry-after=" and a Go duration (2s, 1500ms) or
// whole seconds, then ": " and the reason. Such a failure is a throttle signal
// (isb.SignalSinkRateLimited): the message is tried again after the wait,
// without using a retry step, and with rateLimit.adaptive the vertex's limit
// is cut. sluice's SDK writes it with sinker.ResponseRateLimited.
const RateLimitedMarker = "U+005C__RATE_LIMITED__"

// rateLimited returns the throttle signal of a sink's error message that
// begins with [RateLimitedMarker], or nil when it does not. A retry-after
// that cannot be read leaves RetryAfter 0 and the whole message as Cause.
func rateLimited(msg string) *isb.ThrottledError {
	rest, ok := strings.CutPrefix(msg, RateLimitedMarker)
	if !ok {
		return nil
	}
	te := &isb.ThrottledError{Signal: isb.SignalSinkRateLimited}
	if after, ok := strings.CutPrefix(rest, " retry-after="); ok {
		value, reason, _ := strings.Cut(after, ":")
		d, ok := parseWait(strings.TrimSpace(value))
		if !ok {
			te.Cause = msg
			return te
		}
		te.RetryAfter, rest = d, reason
	} else {
		rest = strings.TrimPrefix(rest, ":")
	}
	te.Cause = strings.TrimSpace(rest)
	return te
}

// parseWait reads a Go duration or whole seconds, not negative.
func parseWait(s string) (time.Duration, bool) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}
