package throttle

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Throttle is everything that throttles a forwarder: the message limit, the
// byte limit, the cost of a message, the shared limits the vertex joined,
// the per-key limit, and where the throttle signals of the downstream and
// what it accepted go. A vertex builds one from its rate-limit spec and
// gives it to its forwarder (forward.Deps.Throttle); a nil *Throttle, or
// the zero value, throttles nothing.
//
// Its fields are set before the forwarder starts and not changed after;
// the limiters it holds are safe for concurrent use.
type Throttle struct {
	// Limiter throttles reads, a token a message; nil is Noop.
	Limiter Limiter
	// Bytes, when set, limits the payload bytes read too (rateLimit.bytes):
	// a batch takes its bytes from it after its read, before it goes on.
	// A *ratelimit.Gate of the byte limiter, as Limiter is of the message
	// limiter.
	Bytes Limiter
	// Cost, when set, is the tokens each message takes from Limiter
	// (rateLimit.cost) in place of one: a batch takes the rest after its
	// read, or gives back what costs less. An error counts as a cost error
	// and the message costs 1. It is called from the forwarder's reading
	// goroutine.
	Cost func(m *isb.Message) (int, error)
	// Groups are the shared limits the vertex joined (rateLimit.groups),
	// one Limiter each: a batch takes a token a message from every one
	// before its read.
	Groups []Limiter
	// PerKey, when set, limits each message key too (rateLimit.perKey).
	PerKey *PerKey
	// Signal receives the throttle signals of the sink and the functions,
	// for a vertex to feed to its rate limiter (rateLimit.adaptive): once per
	// write attempt and kind for the messages a writer refused with an
	// isb.ThrottledError (kind its Signal, retryAfter the longest of their
	// RetryAfter), and once per batch for the messages a function handed back
	// with NackOptions.RateLimited (isb.SignalMapRateLimited, the longest
	// Delay). nil ignores them. It is called from the forwarder's goroutines
	// and must not block.
	Signal func(kind isb.SignalKind, retryAfter time.Duration)
	// Accepted receives the number of messages the sink wrote, once per
	// write attempt that wrote any, for a vertex to feed to its rate
	// limiter (ratelimit.Limiter.Accepted). nil ignores them. It is called
	// from the forwarder's goroutines and must not block.
	Accepted func(n int)

	env     Env         // set by With
	costLog atomic.Bool // set once a cost expression's error is logged
}

// Limiter is a rate limit as a forwarder uses it. Every vertex gives its
// forwarders one: a *ratelimit.Gate (which enforces the limit, or counts it
// in the epochs in which rateLimit.shadow is on), or [Noop] without a rate
// limit. *ratelimit.Limiter and *ratelimit.Lane implement it too.
//
// Before a read the forwarder takes tokens with TryAcquire, which never
// waits and says why there are none, or then with Acquire, which waits for
// them until ctx is done (a deadline before the next epoch fails fast with an
// error matching ratelimit.ErrRateLimited). After the read it settles the
// grant: Settle keeps used of its tokens, gives the others back to the epoch
// that granted them, and returns the grant of the kept ones, which it
// settles again with fewer used when messages a function dropped give their
// tokens back (excludeDropped). Epoch says which epoch is current, so that
// tokens of one that has ended are not spent, and FreshAfter when a wait for
// a throttled sink should end. All are safe for concurrent use.
type Limiter interface {
	TryAcquire(n int) (ratelimit.Grant, ratelimit.Reason)
	Acquire(ctx context.Context, n int) (ratelimit.Grant, error)
	Settle(g ratelimit.Grant, used int) ratelimit.Grant
	Epoch() (int64, time.Duration)
	FreshAfter(d, margin time.Duration) (time.Duration, int64)
}

// The ways into a rate limiter a vertex gives its forwarders.
var (
	_ Limiter = (*ratelimit.Gate)(nil)
	_ Limiter = (*ratelimit.Limiter)(nil)
	_ Limiter = (*ratelimit.Lane)(nil)
	_ Limiter = Noop{}
)

// Noop is the Limiter of a vertex without a rate limit: it grants every request in
// full, never waits, and costs one interface call per batch. Its grants are
// of epoch 0, which never ends.
type Noop struct{}

// Acquire grants n tokens.
func (Noop) Acquire(_ context.Context, n int) (ratelimit.Grant, error) {
	return ratelimit.Grant{Tokens: n}, nil
}

// TryAcquire grants n tokens.
func (Noop) TryAcquire(n int) (ratelimit.Grant, ratelimit.Reason) {
	return ratelimit.Grant{Tokens: n}, ratelimit.NotThrottled
}

// Settle returns a grant of used tokens.
func (Noop) Settle(_ ratelimit.Grant, used int) ratelimit.Grant { return ratelimit.Grant{Tokens: used} }

// Epoch is always 0, the epoch of Noop's grants.
func (Noop) Epoch() (int64, time.Duration) { return 0, time.Second }

// FreshAfter returns d: every epoch is fresh.
func (Noop) FreshAfter(d, _ time.Duration) (time.Duration, int64) { return d, 0 }
