// Package throttle is what throttles a forwarder, in one value a vertex
// gives it: the message limit (a token a message, or its cost), the byte
// limit, the shared limits of the vertex's groups, the per-key limit, and
// where the downstream's throttle signals and what it accepted go.
//
// # Model
//
// A vertex builds a [Throttle] from its rate-limit spec: its Limiter is
// the vertex's *ratelimit.Gate (or a lane's, when forwarders share the
// limiter), Bytes the byte limiter's, Groups one Limiter per group joined.
// A nil *Throttle throttles nothing; [Noop] is the Limiter of a vertex
// without a rate limit. The forwarder binds it to its tracker, metrics,
// logger and clock with [Throttle.With].
//
// # A batch's tokens
//
// A batch's tokens are one [Tokens] value, handled here only. The
// forwarder's reading loop calls the throttle:
//
//   - [Throttle.Take] before the read: message tokens, and those of each group;
//   - [Throttle.Pay] after it: the unused go back, the bytes and the cost are paid;
//   - [Throttle.Send] hands the batch on with tokens of the epoch it goes on in.
//
// The worker that writes the batch holds its Tokens and calls them:
//
//   - [Tokens.Drop] and [Tokens.Refund] give back what dropped messages took;
//   - [Tokens.Freshen] before and after each write to the sink;
//   - [Tokens.Retake] after a throttled sink's wait, [Tokens.RenewAll] for
//     messages delivered again.
//
// # Tokens belong to their epoch
//
// A grant is the share of one second; spent in a later one it would come on
// top of that second's. Every token a throttle takes after a read follows one
// rule (all of one epoch, the current one's) and a grant of an epoch that has
// ended is given back and asked for again, never returned: a limiter's fast
// path may still grant such tokens after a freeze.
//
// All methods are safe for concurrent use with each other, except that the
// writes of one forwarder and their Freshen go one at a time.
package throttle
