// Package ratelimit is sluice's throttler: a token pool of at most Max tokens per
// one-second epoch, shared by every replica of a vertex, ramping up from Min over a
// ramp-up duration in one of four modes. It can be used on its own, like
// golang.org/x/time/rate.
//
// # Model
//
// Time is cut into epochs, whole seconds of the store clock. In each epoch the pool
// P (kept in integer milli-tokens) is split among the n replicas that agree to be in
// the pool: the replica of rank i gets floor(floor(P)/n), plus one token for the
// first floor(P) mod n ranks, so the shares sum to exactly floor(P).
//
// # Verbs
//
// A caller takes tokens before it reads, as a [Grant] of the current epoch:
// [Limiter.Acquire] waits for them when none are left (or fails fast with a
// [*ThrottledError] when its deadline comes first), [Limiter.TryAcquire] never
// waits and says why there are none (a [Reason]). After the read it keeps what
// it used and gives the rest back with [Limiter.Settle], which returns the grant
// of the tokens kept, to settle again with fewer; tokens of an epoch that has
// ended are dropped, so unused tokens never carry over to the next epoch.
// [Limiter.Deposit] is Settle's short form, for a caller that gives back a
// number of unused tokens once.
//
// # Modes
//
// The pool starts at Min (at Max when RampUpDuration is 0) and moves once per epoch
// by slope = round_half_up((Max-Min)*1000/rampUpSeconds) milli-tokens, always within
// [Min, Max]:
//
//   - [Scheduled]: P = Min + slope*(epochs since start), calls or not.
//   - [Relaxed]: up one slope in each epoch with a call; idle epochs stall.
//   - [OnlyIfUsed]: up one slope when the last epoch with a call used at least
//     ThresholdPercentage of its share.
//   - [GoBackN]: down by RampDownPercentage of a slope per idle epoch after more than
//     CoolDownPeriod without calls; otherwise up one slope after a well-used epoch
//     and down one slope after a poorly used one.
//
// The first epoch with a call always sees the starting pool. `vertex simulate` runs
// a Limiter on a simulated clock to show a ramp; package simulate is the same from Go.
//
// # Closed loop
//
// With Config.Adaptive, what the vertex protects can lower the limit: a
// throttle signal ([Limiter.Signal], from an HTTP 429 or 503 or a function
// that says it is rate limited) cuts the pool to
// max(Min, floor(P*(100-CutPercentage)/100)) tokens, at most once per epoch
// however many signals come, and a Retry-After pauses the limiter until then:
// the tokens left in the epoch are taken back and none are granted before
// that time. The pool then ramps back up as the mode says, so the vertex finds
// the resource's capacity by additive increase and multiplicative decrease.
// The cut learns a ceiling, the pool at which the signal came: the climb
// back bisects towards a hold just below it (HoldBelowPercentage), probes
// above it after ProbeAfter, by little and then by more, and forgets it
// after ForgetAfter; a probe's signal falls back to the rate that passed.
// What the downstream accepted ([Limiter.Accepted]) makes a replica's own
// cut learn a fixed window's quota exactly, and a replica tries pacing at
// its first signal, for a downstream that takes spread over the second what
// it refuses in a burst. [Limiter.SignalUnavailable] (an HTTP 503) cuts and
// pauses but teaches no ceiling. With a store, the store decides the cut and
// its ceiling for every replica and keeps the pause (see [share.Adaptation]);
// each replica pauses at its next sync and applies the cut from the same
// epoch, so shares still sum to floor(P). Package simulate replays a
// downstream with a quota (a fixed window, a token bucket).
//
// # Live changes
//
// [Limiter.Update] changes the fields that [Fields] marks live (the limit,
// its ramp and mode, shadow) while the limiter runs. With a store, every
// replica applies the change from the same epoch, which the store picks (see
// [share.LimitChange]); without one, from the next epoch. The switching epoch keeps
// the pool it would have had, capped by the new Max, so it never grants more
// than the smaller of the two limits; the new ramp goes on from there.
//
// # Hot path
//
// Acquire, TryAcquire and Settle take no lock and read no clock while tokens are
// left: the epoch's tokens are kept in atomic counters that a timer replaces at
// each epoch boundary (or pacing slice). Acquire is one atomic add while tokens are
// left. A process frozen past an epoch's end runs its timer late, so until the
// timer or the first call that reads the clock ([Limiter.Epoch], an Acquire that
// finds no tokens) begins the current epoch, the fast path may still grant what was
// left of the one before; a [Grant] says its epoch, and a caller that waited across
// a boundary (on a read, on a write) compares it with Limiter.Epoch before it spends
// the tokens: tokens of a second that has passed come on top of the current one's.
// Goroutines that acquire
// concurrently should each use a [Lane], whose tokens sit on a cache line of its own
// yet remain available to every other caller. Callers that must wait are queued and
// served in arrival order when tokens come, so no reader starves another.
//
// # Replicas
//
// With [WithStore], a limiter is one replica of a limit shared in a [share.Store]: it syncs
// with the store from a background goroutine (every 100ms by default), never per
// Acquire, and [New] does no I/O: the first sync starts in the background at once. Replicas agree on their count before a newcomer takes tokens, a new
// count takes effect at the next epoch boundary, and a replica that leaves or stops
// sending heartbeats is dropped so the others get its share back. Package memstore
// is an in-process store.
//
// A replica's lease is its StaleAfter less a margin, counted on its own clock from
// the start of its last successful sync; the store drops it StaleAfter after it
// saw that sync, on the store's clock. Once its lease has run out (the store out of
// reach, its network cut, the process frozen or starved) a replica grants nothing
// until it has synced again and the replicas have agreed on it, as a newcomer does;
// with [LastKnown] it keeps its last pool while its syncs fail, availability first.
// Epochs are seconds of the store's clock, learned at each sync within half the
// round trip; a sync slower than the one the offset came from leaves it alone, and
// a step of the local clock is followed at the next sync.
//
// # Bytes and costs
//
// A token is whatever the caller counts: a vertex's byte limit
// (rateLimit.bytes) is a second Limiter whose tokens are payload bytes, with
// a pool of its own in the same store (package redisstore's Store.Limit), and with a
// cost (rateLimit.cost) a message takes as many tokens of the message limit
// as its cost. Sizes and costs are known after the read, so the forwarder
// takes them then, all of one epoch when a share allows.
//
// # Per-key limits
//
// A [KeyLimiter] grants tokens per key instead: at most Max per key per epoch, over
// every replica of a [share.KeyStore] (redisstore's, one script run per call) or in this
// process. [KeyLimiter.TryAcquire] asks for all the keys of a batch at once, so a batch
// costs one store call whatever its keys. A forwarder holds the messages of keys it
// was granted no tokens for, and gives their tokens of the Limiter back.
package ratelimit
