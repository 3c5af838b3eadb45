// Package strict is a rate limiter for calls that must never come closer than a
// set spacing, across every process that shares it: "at most one call every
// interval" (or k every interval, one per interval/k), with permits given out on
// Redis's clock by one Lua script (a generic cell rate algorithm).
//
// A caller that finds the next permit not yet due may reserve it ahead and wait
// for it, up to MaxReserved permits ahead; beyond that it is told when to try
// again. A caller that oversleeps its permit by more than Expiry wastes it and
// takes another, so late callers do not crowd the ones after them.
//
// [Wrap] turns a function into a throttled one, waiting for a permit or failing
// fast, per option. The waits happen on the limiter's clock ([WithClock]; the
// wall clock by default).
package strict

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

var (
	//go:embed permit.lua
	permitSource string
	permitScript = redis.NewScript(permitSource)
)

// Config is a strict limit.
type Config struct {
	// Interval and Permits: at most Permits permits every Interval, spaced
	// Interval/Permits apart. Permits defaults to 1.
	Interval time.Duration
	Permits  int
	// MaxReserved is how many permits ahead a caller may reserve and wait for; 0
	// gives permits only when they are due.
	MaxReserved int
	// Expiry is how late a caller may use its permit (default a quarter of the
	// spacing); a later one is wasted and another taken.
	Expiry time.Duration
}

// Limiter gives out permits from one Redis key. It is safe for concurrent use,
// and every Limiter on the same key and Redis shares the limit.
type Limiter struct {
	client  redis.Scripter
	key     string
	spacing time.Duration
	cfg     Config
	clk     clock.Clock
}

// Option configures a [Limiter] beyond its [Config].
type Option func(*Limiter)

// WithClock makes the limiter wait for reserved permits, and back off, on c
// instead of the wall clock. Permits themselves are always given out on Redis's
// clock.
func WithClock(c clock.Clock) Option { return func(l *Limiter) { l.clk = c } }

// Permit is a permission to make one call.
type Permit struct {
	// At is the permit's time on Redis's clock: permits are at least the spacing
	// apart.
	At time.Time
}

// ErrExpired is returned by Reserve's caller when it woke too late for a permit.
var ErrExpired = errors.New("strict: permit expired before use")

// New returns a limiter for cfg on key in the Redis of client.
func New(client redis.Scripter, key string, cfg Config, opts ...Option) (*Limiter, error) {
	if cfg.Permits == 0 {
		cfg.Permits = 1
	}
	switch {
	case key == "":
		return nil, errors.New("strict: empty key")
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("strict: Interval (%v) must be positive", cfg.Interval)
	case cfg.Permits < 0:
		return nil, fmt.Errorf("strict: Permits (%d) must be at least 1", cfg.Permits)
	case cfg.MaxReserved < 0:
		return nil, fmt.Errorf("strict: MaxReserved (%d) must not be negative", cfg.MaxReserved)
	case cfg.Expiry < 0:
		return nil, fmt.Errorf("strict: Expiry (%v) must not be negative", cfg.Expiry)
	}
	l := &Limiter{client: client, key: key, cfg: cfg, spacing: cfg.Interval / time.Duration(cfg.Permits), clk: clock.Real()}
	for _, opt := range opts {
		opt(l)
	}
	if l.clk == nil {
		return nil, errors.New("strict: WithClock(nil)")
	}
	if l.spacing < time.Microsecond {
		return nil, fmt.Errorf("strict: Interval/Permits (%v) must be at least 1µs", l.spacing)
	}
	if l.cfg.Expiry == 0 {
		l.cfg.Expiry = l.spacing / 4
	}
	return l, nil
}

// Spacing returns the least time between two permits.
func (l *Limiter) Spacing() time.Duration { return l.spacing }

// reservation is a permit reserved for a time, or a refusal with a retry time.
type reservation struct {
	ok    bool
	at    time.Time     // the permit's time (Redis clock)
	wait  time.Duration // from the reservation to the permit, or to the retry
	taken time.Time     // local time the answer came
}

func (l *Limiter) reserve(ctx context.Context, maxReserved int) (reservation, error) {
	ttl := max(l.spacing*time.Duration(maxReserved+2), time.Second)
	res, err := permitScript.Run(ctx, l.client, []string{l.key}, l.spacing.Microseconds(), maxReserved, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return reservation{}, fmt.Errorf("strict: %w", err)
	}
	if len(res) != 3 {
		return reservation{}, fmt.Errorf("strict: %d values from the script, want 3", len(res))
	}
	r := reservation{ok: res[0] == 1, taken: l.clk.Now()}
	if r.ok {
		r.at = time.UnixMicro(res[1])
		r.wait = time.Duration(res[1]-res[2]) * time.Microsecond
	} else {
		r.wait = time.Duration(res[1]) * time.Microsecond
	}
	return r, nil
}

// Allow takes a permit if one is due now. Otherwise it returns an error that
// matches [ratelimit.ErrRateLimited] and says, as a *ratelimit.ThrottledError,
// how long until one is.
func (l *Limiter) Allow(ctx context.Context) (Permit, error) {
	r, err := l.reserve(ctx, 0)
	if err != nil {
		return Permit{}, err
	}
	if !r.ok {
		return Permit{}, &ratelimit.ThrottledError{Reason: ratelimit.ReasonRateLimited, Wait: r.wait}
	}
	return Permit{At: r.at}, nil
}

// Reserve reserves the next permit, at most MaxReserved ahead, and waits for it.
// When the next permit is further ahead it fails fast with a
// *ratelimit.ThrottledError saying when to try again; when ctx ends first it
// returns ctx's error; when the caller wakes more than Expiry late it returns
// [ErrExpired] (the permit is wasted).
func (l *Limiter) Reserve(ctx context.Context) (Permit, error) {
	r, err := l.reserve(ctx, l.cfg.MaxReserved)
	if err != nil {
		return Permit{}, err
	}
	if !r.ok {
		return Permit{}, &ratelimit.ThrottledError{Reason: ratelimit.ReasonRateLimited, Wait: r.wait}
	}
	due := r.taken.Add(r.wait)
	if err := l.sleep(ctx, due.Sub(l.clk.Now())); err != nil {
		return Permit{}, err
	}
	if late := l.clk.Now().Sub(due); late > l.cfg.Expiry {
		return Permit{}, fmt.Errorf("%w: %v late", ErrExpired, late)
	}
	return Permit{At: r.at}, nil
}

// Wait waits for a permit: it reserves one when it can, and otherwise backs off
// (with jitter) until it can, until ctx ends.
func (l *Limiter) Wait(ctx context.Context) (Permit, error) {
	for {
		p, err := l.Reserve(ctx)
		var te *ratelimit.ThrottledError
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, ErrExpired):
			continue
		case errors.As(err, &te):
			// Jitter keeps waiting callers from coming back in step.
			if err := l.sleep(ctx, te.Wait+time.Duration(rand.Int64N(int64(l.spacing)/2+1))); err != nil {
				return Permit{}, err
			}
		default:
			return Permit{}, err
		}
	}
}

// sleep waits d on the limiter's clock, or until ctx is done.
func (l *Limiter) sleep(ctx context.Context, d time.Duration) error {
	if !clock.Sleep(ctx, l.clk, d) {
		return ctx.Err()
	}
	return nil
}
