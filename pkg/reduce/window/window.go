package window

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is the error of a strategy that cannot assign windows: a
// length or slide that is not positive, or a slide longer than the length.
var ErrInvalid = errors.New("window: invalid strategy")

// Window is the event-time interval [Start, End).
type Window struct {
	Start, End time.Time
}

// Contains reports whether event time t is in w.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// ResultTime is the event time of a window's results: its end less a
// millisecond, the last millisecond inside it.
func (w Window) ResultTime() time.Time { return w.End.Add(-time.Millisecond) }

// String returns "[start, end)" in UTC, RFC 3339 with the fraction of a
// second where there is one.
func (w Window) String() string {
	return fmt.Sprintf("[%s, %s)", w.Start.UTC().Format(time.RFC3339Nano), w.End.UTC().Format(time.RFC3339Nano))
}

// Strategy assigns event times to windows: of one length that start every
// slide, aligned to the Unix epoch ([Fixed], [Sliding]), or sessions per
// key set that a gap of a timeout ends ([Session]). The zero value assigns
// nothing.
type Strategy struct {
	length, slide time.Duration
	timeout       time.Duration // of session windows; 0 for aligned ones
}

// Session returns the strategy of session windows of timeout: per key set,
// a message at event time t opens the session [t, t+timeout), or joins a
// session it falls in or touches, which grows to cover [t, t+timeout) too;
// sessions that come to overlap or touch merge into one. A [Book] keeps
// the sessions; Assign gives the window a message opens on its own.
func Session(timeout time.Duration) (Strategy, error) {
	if timeout <= 0 {
		return Strategy{}, fmt.Errorf("%w: session timeout (%v) must be positive", ErrInvalid, timeout)
	}
	return Strategy{length: timeout, slide: timeout, timeout: timeout}, nil
}

// Timeout is the timeout of session windows, 0 for aligned ones.
func (s Strategy) Timeout() time.Duration { return s.timeout }

// Fixed returns the strategy of fixed windows of length: each event time
// is in exactly one.
func Fixed(length time.Duration) (Strategy, error) {
	if length <= 0 {
		return Strategy{}, fmt.Errorf("%w: length (%v) must be positive", ErrInvalid, length)
	}
	return Strategy{length: length, slide: length}, nil
}

// Sliding returns the strategy of windows of length that start every slide:
// an event time is in length/slide of them (rounded up). The slide must be
// positive and at most the length.
func Sliding(length, slide time.Duration) (Strategy, error) {
	switch {
	case length <= 0:
		return Strategy{}, fmt.Errorf("%w: length (%v) must be positive", ErrInvalid, length)
	case slide <= 0:
		return Strategy{}, fmt.Errorf("%w: slide (%v) must be positive", ErrInvalid, slide)
	case slide > length:
		return Strategy{}, fmt.Errorf("%w: slide (%v) must be at most the length (%v)", ErrInvalid, slide, length)
	}
	return Strategy{length: length, slide: slide}, nil
}

// Length is the length of the strategy's windows: the timeout for sessions,
// the length a session has at the least.
func (s Strategy) Length() time.Duration { return s.length }

// Slide is how often a window starts: the length for fixed windows.
func (s Strategy) Slide() time.Duration { return s.slide }

// Assign appends the windows that contain event time t to dst, earliest
// start first, and returns the extended slice. For session windows it is
// the one window [t, t+timeout).
func (s Strategy) Assign(dst []Window, t time.Time) []Window {
	if s.slide <= 0 {
		return dst
	}
	if s.timeout > 0 {
		return append(dst, Window{Start: t, End: t.Add(s.timeout)})
	}
	ns, slide, length := t.UnixNano(), int64(s.slide), int64(s.length)
	last := floorDiv(ns, slide) * slide // the latest start at or before t
	first := last
	for first-slide > ns-length { // a start after t-length still covers t
		first -= slide
	}
	for start := first; start <= last; start += slide {
		dst = append(dst, Window{Start: time.Unix(0, start), End: time.Unix(0, start+length)})
	}
	return dst
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Union returns the smallest window that covers w and o.
func (w Window) Union(o Window) Window {
	if o.Start.Before(w.Start) {
		w.Start = o.Start
	}
	if o.End.After(w.End) {
		w.End = o.End
	}
	return w
}
