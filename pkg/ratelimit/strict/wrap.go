package strict

import "context"

// WrapOption chooses how a wrapped function waits for its permit.
type WrapOption func(*wrapOptions)

type wrapOptions struct{ reject bool }

// Reject makes a wrapped function fail fast with a rate-limit error when no
// permit is due now, instead of waiting for one.
func Reject() WrapOption { return func(o *wrapOptions) { o.reject = true } }

// Wrap returns f throttled by l: each call first takes a permit, waiting for it
// (the default) or failing fast with an error that matches
// ratelimit.ErrRateLimited (with [Reject]). f is not called without a permit.
func Wrap[T, R any](l *Limiter, f func(context.Context, T) (R, error), opts ...WrapOption) func(context.Context, T) (R, error) {
	var o wrapOptions
	for _, opt := range opts {
		opt(&o)
	}
	take := l.Wait
	if o.reject {
		take = l.Allow
	}
	return func(ctx context.Context, arg T) (R, error) {
		if _, err := take(ctx); err != nil {
			var zero R
			return zero, err
		}
		return f(ctx, arg)
	}
}
