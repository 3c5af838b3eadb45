package simulate

import "time"

// Downstream is what a simulated vertex sends to ([Scenario.Downstream]):
// a quota that takes the requests sent in an epoch, all at its start, and
// refuses those beyond it.
type Downstream interface {
	// Take is told that sent requests came in epoch (from 1) and returns
	// how many it accepted, whether it refused any (a throttle signal), and
	// the Retry-After it answered with (0 for none).
	Take(epoch, sent int) (accepted int, refused bool, retryAfter time.Duration)
}

// QuotaChange is a downstream's quota from an epoch on.
type QuotaChange struct {
	Epoch int
	Rate  int
}

// FixedWindow is a downstream that accepts Rate requests in each epoch
// (each second of the wall clock), or the rate of the last of Changes whose
// epoch has come, and refuses the rest with RetryAfter.
type FixedWindow struct {
	Rate       int
	Changes    []QuotaChange // in order of epoch
	RetryAfter time.Duration
}

// rateAt returns the quota of epoch e.
func rateAt(rate int, changes []QuotaChange, e int) int {
	for _, c := range changes {
		if c.Epoch <= e {
			rate = c.Rate
		}
	}
	return rate
}

// Take implements [Downstream].
func (f *FixedWindow) Take(epoch, sent int) (int, bool, time.Duration) {
	q := rateAt(f.Rate, f.Changes, epoch)
	if sent <= q {
		return sent, false, 0
	}
	return q, true, f.RetryAfter
}

// TokenBucket is a downstream that holds up to Burst tokens, refilled at
// Rate a second (or at the rate of the last of Changes whose epoch has
// come), starting full: each request accepted takes one, and the rest are
// refused with RetryAfter. Requests come at an epoch's start, so a bucket
// whose Burst is below its Rate accepts at most Burst in an epoch: set
// rateLimit.pacing to spread them.
type TokenBucket struct {
	Rate, Burst int
	Changes     []QuotaChange
	RetryAfter  time.Duration

	tokens  int
	started bool
}

// Take implements [Downstream].
func (b *TokenBucket) Take(epoch, sent int) (int, bool, time.Duration) {
	if !b.started {
		b.tokens, b.started = b.Burst, true
	} else {
		b.tokens = min(b.Burst, b.tokens+rateAt(b.Rate, b.Changes, epoch))
	}
	acc := min(sent, b.tokens)
	b.tokens -= acc
	if acc == sent {
		return acc, false, 0
	}
	return acc, true, b.RetryAfter
}
