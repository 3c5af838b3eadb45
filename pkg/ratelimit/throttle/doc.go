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
// without a rate limit.
package throttle
