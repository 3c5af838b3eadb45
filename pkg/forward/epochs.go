package forward

import (
	"context"
	"slices"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Tokens belong to their epoch (see package throttle): a read that returns
// in a later epoch than its grant sends its batch on with the current
// epoch's tokens (sendFresh), and a write to the sink starts on, and after
// a stall is charged, the current epoch's (spendOn, chargeFor).

// sendFresh sends batch, read with the tokens of g, on with tokens of the
// epoch it goes on in: at once with g's when g's epoch is current; otherwise
// it gives g's back, takes the current epoch's and sends the batch in parts as
// tokens come, each with a grant of its own. send must be done with a part's
// messages when it returns, or copy them. sendFresh returns how many messages
// were not sent because hard ended before they had tokens: those are
// abandoned (handed back to a reader that takes them).
func (f *Forwarder) sendFresh(hard context.Context, g ratelimit.Grant, batch []isb.ReadMessage, send func(ratelimit.Grant, []isb.ReadMessage)) (unsent int) {
	if !f.th.Stale(g) {
		send(f.th.Keep(g, len(batch)), batch)
		return 0
	}
	f.th.GiveBack(g)
	first := true
	for len(batch) > 0 {
		ng, ok := f.th.Renew(hard, len(batch), false)
		if !ok {
			f.abandon(hard, "acquire", batch, hard.Err())
			return len(batch)
		}
		k := min(max(ng.Tokens, 1), len(batch))
		if first && k < len(batch) {
			// The parts after the first go on after it was handed over,
			// which may reuse batch's buffer.
			batch = append(batch[:k:k], slices.Clone(batch[k:])...)
		}
		first = false
		send(f.th.Keep(ng, k), batch[:k])
		batch = batch[k:]
	}
	return 0
}

// spendOn makes the tokens a write of n messages to the sink (stage
// StageWrite) starts on those of the current epoch, for up to the batch's
// kept tokens (see throttle.Throttle.Freshen). It returns hard's error when
// hard ends first. f.writeMu is held, so that writes and the tokens they
// take go one at a time.
func (f *worker) spendOn(hard context.Context, stage string, n int) error {
	if stage == StageWrite && !f.th.Freshen(hard, &f.grant, &f.paid, min(n, f.kept)) {
		return hard.Err()
	}
	return nil
}

// chargeFor takes, after a write of n messages to the sink that returned in
// a later epoch than the tokens it started on (a stalled sink), that epoch's
// tokens too (see throttle.Throttle.Freshen). A write that ends with hard is
// not charged. f.writeMu is held.
func (f *worker) chargeFor(hard context.Context, stage string, n int) {
	if stage == StageWrite {
		f.th.Freshen(hard, &f.grant, &f.paid, min(n, f.kept))
	}
}
