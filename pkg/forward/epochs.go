package forward

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Tokens belong to their epoch. A grant is the share of one second; spent in a
// later second, its tokens would come on top of that second's, and a
// downstream that counts per second would see up to twice the limit. So the
// tokens of messages are spent, and if need be taken again, at the three
// moments the messages may reach the downstream:
//
//   - a read that returns in a later epoch than its grant (a source that
//     blocked across a boundary, one that reconnected, a replica that was
//     frozen) gives its tokens back and takes the current epoch's for what it
//     read, all of one epoch, before the messages go on; when the epoch has
//     fewer left than the batch, the batch goes on in parts;
//   - a batch whose tokens are of an epoch that has ended when it is to be
//     written (a slow function, a batch waiting behind a slow write) takes the
//     current epoch's tokens before it is written;
//   - a write that returns in a later epoch than the tokens it was written on
//     (a stalled sink) takes that epoch's tokens too, after the fact, so that
//     what is read next in that epoch leaves room for the messages the stall
//     let through in it.
//
// At a write, a batch's bytes and its cost beyond a token a message are paid
// again with them when they too are of an epoch that has ended (repay).
// Tokens taken again are counted in the granted metric and in
// sluice_ratelimit_retaken_total.

// stale reports whether g's tokens are of an epoch that has ended.
func (f *Forwarder) stale(g ratelimit.Grant) bool { return staleIn(f.th.Limiter, g) }

// staleIn reports whether g, a grant of lim, is of an epoch that has ended.
func staleIn(lim Limiter, g ratelimit.Grant) bool {
	if g.Tokens == 0 {
		return false
	}
	now, _ := lim.Epoch()
	return g.Epoch() < now
}

// giveBack gives back every token of g, kept or not: the epoch they were
// granted in has ended, so the limiter drops them.
func (f *Forwarder) giveBack(g ratelimit.Grant) { f.th.Limiter.Settle(g, 0) }

// renew takes up to n tokens for messages that go on now, from the current
// epoch or, when it has none left, a later one, waiting as a read does. With
// whole, they are all of one epoch: an epoch that has fewer than n left is
// waited out for the next, and only a next one that has fewer too (the share
// is smaller than n) grants fewer than n. Without whole the caller sends on
// what it gets and asks again for the rest. The grant is the caller's to keep
// (see keep and spend). renew reports false when ctx ends first; a limiter
// that fails otherwise (closed) lets the messages go without tokens.
func (f *Forwarder) renew(ctx context.Context, n int, whole bool) (ratelimit.Grant, bool) {
	first, _ := f.th.Limiter.Epoch()
	for {
		g, err := f.acquire(ctx, n)
		switch {
		case ctx.Err() != nil:
			return ratelimit.Grant{}, false
		case err != nil:
			f.log.Warn("no tokens for messages that go on in a later epoch than their grant's; sending them without", zap.Error(err))
			return ratelimit.GrantOf(n, 0), true
		case g.Tokens == 0:
			continue // rate limited: wait again
		}
		if now, _ := f.th.Limiter.Epoch(); g.Epoch() < now {
			// The limiter has yet to begin the current epoch: ask again soon.
			f.giveBack(g)
			if !f.sleep(ctx, staleTokenPause) {
				return ratelimit.Grant{}, false
			}
			continue
		}
		if !whole || g.Tokens >= n || g.Epoch() > first {
			f.d.Metrics.Retaken.Add(float64(g.Tokens))
			return g, true
		}
		// Fewer than n left in this epoch: all of them from the next.
		f.giveBack(g)
		_, left := f.th.Limiter.Epoch()
		if !f.sleep(ctx, left) {
			return ratelimit.Grant{}, false
		}
	}
}

// staleTokenPause is how long renew waits before it asks again for tokens
// of an epoch that has begun but that the limiter has not yet begun.
const staleTokenPause = time.Millisecond

// spend keeps every token of g, a grant renew made for messages that go on:
// settled at once, which counts them in shadow, and counted.
func (f *Forwarder) spend(g ratelimit.Grant) {
	f.th.Limiter.Settle(g, g.Tokens)
	f.d.Metrics.Granted.Add(float64(g.Tokens))
}

// sendFresh sends batch, read with the tokens of g, on with tokens of the
// epoch it goes on in: at once with g's when g's epoch is current; otherwise
// it gives g's back, takes the current epoch's and sends the batch in parts as
// tokens come, each with a grant of its own. send must be done with a part's
// messages when it returns, or copy them. sendFresh returns how many messages
// were not sent because hard ended before they had tokens: those are
// abandoned (handed back to a reader that takes them).
func (f *Forwarder) sendFresh(hard context.Context, g ratelimit.Grant, batch []isb.ReadMessage, send func(ratelimit.Grant, []isb.ReadMessage)) (unsent int) {
	if !f.stale(g) {
		send(f.keep(g, len(batch)), batch)
		return 0
	}
	f.giveBack(g)
	first := true
	for len(batch) > 0 {
		ng, ok := f.renew(hard, len(batch), false)
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
		send(f.keep(ng, k), batch[:k])
		batch = batch[k:]
	}
	return 0
}

// spendOn makes the tokens a write of n messages to the sink (stage
// StageWrite) starts on those of the current epoch: when the batch's grant is
// of an epoch that has ended (a slow function, a batch that waited for its
// turn to write), it takes the current epoch's for up to n of its kept
// tokens, all of one epoch (see renew), and writes on them. It returns
// hard's error when hard ends first. f.writeMu is held, so that writes and
// the tokens they take go one at a time.
func (f *worker) spendOn(hard context.Context, stage string, n int) error {
	n = min(n, f.kept)
	if stage != StageWrite || n <= 0 {
		return nil
	}
	if f.stale(f.grant) {
		g, ok := f.renew(hard, n, true)
		if !ok {
			return hard.Err()
		}
		f.spend(g)
		f.grant = g
	}
	if !f.repay(hard) {
		return hard.Err()
	}
	return nil
}

// chargeFor takes, after a write of n messages to the sink that returned in
// a later epoch than the tokens it started on (a stalled sink), that epoch's
// tokens too for up to n of the batch's kept ones: the messages may have
// reached the downstream in it, and what is read next in it must leave room
// for them. A write that ends with hard is not charged. f.writeMu is held.
func (f *worker) chargeFor(hard context.Context, stage string, n int) {
	n = min(n, f.kept)
	if stage != StageWrite || n <= 0 {
		return
	}
	if f.stale(f.grant) {
		g, ok := f.renew(hard, n, true)
		if !ok {
			return
		}
		f.spend(g)
		f.grant = g
	}
	f.repay(hard)
}

// renewAll takes n tokens, all of one epoch when it can (see renew), for n
// messages delivered again, and keeps them as a read's (see keep).
func (f *Forwarder) renewAll(hard context.Context, n int) (ratelimit.Grant, bool) {
	g, ok := f.renew(hard, n, true)
	if ok {
		g = f.keep(g, g.Tokens)
	}
	return g, ok
}
