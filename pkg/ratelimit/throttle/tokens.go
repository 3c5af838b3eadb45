package throttle

import (
	"context"
	"errors"
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
//     fewer left than the batch, the batch goes on in parts (Send);
//   - a batch whose tokens are of an epoch that has ended when it is to be
//     written (a slow function, a batch waiting behind a slow write) takes the
//     current epoch's tokens before it is written (Freshen);
//   - a write that returns in a later epoch than the tokens it was written on
//     (a stalled sink) takes that epoch's tokens too, after the fact, so that
//     what is read next in that epoch leaves room for the messages the stall
//     let through in it (Freshen again).
//
// At a write, a batch's bytes and its cost beyond a token a message are paid
// again with them when they too are of an epoch that has ended (repay).
// Tokens taken again are counted in the granted metric and in
// sluice_ratelimit_retaken_total.

// Tokens are the tokens a batch holds, of the throttle that took them: its
// grant of message tokens, how many of them it keeps, and what it paid after
// its read. The loop takes them (Take), pays for the read (Pay) and sends
// them on with the batch (Send); the worker that writes the batch holds them
// as one value and calls their verbs: Drop and Refund for what a function
// dropped, Freshen around each write, Retake after a throttled sink, RenewAll
// for messages it delivers again. The zero value holds none.
type Tokens struct {
	t     *Throttle
	grant ratelimit.Grant
	// kept is the messages the batch keeps tokens of, once sent on (Send):
	// one a message, less those dropped with excludeDropped (Drop).
	kept int
	paid payment
}

// N returns the message tokens of tok: the most messages its read takes.
func (tok Tokens) N() int { return tok.grant.Tokens }

// Grant returns tok's grant of message tokens.
func (tok Tokens) Grant() ratelimit.Grant { return tok.grant }

// Take takes the tokens of a read of up to n messages, before the read:
// up to n message tokens (see acquire) and, of every group, as many as the
// fewest any of them grants (see takeGroups). Its errors are acquire's.
func (t *Throttle) Take(ctx context.Context, n int) (Tokens, error) {
	g, err := t.acquire(ctx, n)
	if err != nil {
		return Tokens{t: t, grant: g}, err
	}
	var groups []ratelimit.Grant
	if len(t.Groups) > 0 && g.Tokens > 0 {
		g, groups = t.takeGroups(ctx, g)
	}
	return Tokens{t: t, grant: g, paid: payment{groups: groups}}, nil
}

// acquire takes up to n message tokens for a read. When none are available
// now it tells Pauses why while it waits for them. It returns no tokens and
// no error when the limiter asks to be tried again, ctx's error when ctx
// ends, and the limiter's when it fails otherwise (closed).
func (t *Throttle) acquire(ctx context.Context, n int) (ratelimit.Grant, error) {
	g, reason := t.Limiter.TryAcquire(n)
	if g.Tokens == 0 {
		var err error
		t.env.Pauses.Begin(reason)
		g, err = t.Limiter.Acquire(ctx, n)
		t.env.Pauses.End(reason)
		if err != nil {
			if ctx.Err() != nil {
				return g, ctx.Err()
			}
			if errors.Is(err, ratelimit.ErrRateLimited) {
				return ratelimit.Grant{}, nil // try again
			}
			return g, err
		}
	}
	return g, nil
}

// keep keeps one of g's tokens for each of the read messages and gives the
// others back at once, and returns the grant of the kept ones. The granted
// metric counts only the tokens kept: a grant's unread tokens never counted
// against the limit, and a dry source would otherwise add a batch to it at
// every read.
func (t *Throttle) keep(g ratelimit.Grant, read int) ratelimit.Grant {
	g = t.Limiter.Settle(g, read)
	if read > 0 {
		t.env.Metrics.Granted.Add(float64(read))
	}
	return g
}

// Drop gives back, with excludeDropped, the message tokens of dropped of
// the messages tok keeps, which a function dropped: only what goes on
// counts, against the limit or in shadow. What they paid after the read
// goes back with Refund.
func (tok *Tokens) Drop(dropped int) {
	if dropped <= 0 {
		return
	}
	t := tok.t
	tok.grant = t.Limiter.Settle(tok.grant, tok.kept-dropped)
	tok.kept -= dropped
	t.env.Metrics.Deposited.Add(float64(dropped))
}

// takeGroups takes as many tokens of every group as g holds and returns g
// and the groups' grants cut to the fewest any of them granted: the read
// takes no more. When a group has none left, it gives back all it holds
// (the read's tokens would go stale while it waits), waits until that group
// has tokens again (counted under the reason the group gives), and starts
// over, with the vertex's tokens taken as a read takes them. When ctx ends
// first, it returns no tokens.
func (t *Throttle) takeGroups(ctx context.Context, g ratelimit.Grant) (ratelimit.Grant, []ratelimit.Grant) {
	want := g.Tokens
	grants := make([]ratelimit.Grant, len(t.Groups))
	for {
		n, empty := g.Tokens, -1
		var reason ratelimit.Reason
		for i, grp := range t.Groups {
			grants[i], reason = grp.TryAcquire(n)
			if grants[i].Tokens == 0 {
				empty = i
				break
			}
			n = min(n, grants[i].Tokens)
		}
		if empty < 0 {
			for i, grp := range t.Groups {
				grants[i] = grp.Settle(grants[i], n)
			}
			if n < g.Tokens {
				g = t.Limiter.Settle(g, n)
			}
			return g, grants
		}
		t.Limiter.Settle(g, 0)
		for i := range empty {
			t.Groups[i].Settle(grants[i], 0)
		}
		grp := t.Groups[empty]
		t.env.Pauses.Begin(reason)
		gg, err := grp.Acquire(ctx, 1) // waits until the group has tokens again
		t.env.Pauses.End(reason)
		grp.Settle(gg, 0)
		if ctx.Err() != nil {
			return ratelimit.Grant{}, make([]ratelimit.Grant, len(t.Groups))
		}
		if err != nil && !errors.Is(err, ratelimit.ErrRateLimited) {
			t.env.Logger.Warn("no tokens of a shared limit; reading without it", zap.Error(err))
			g, _ = t.acquire(ctx, want)
			return g, make([]ratelimit.Grant, len(t.Groups))
		}
		if g, err = t.acquire(ctx, want); err != nil || g.Tokens == 0 {
			return ratelimit.Grant{}, make([]ratelimit.Grant, len(t.Groups))
		}
	}
}

// settleGroups keeps used of each of grants, the groups' grants of a read
// (see takeGroups), and gives the others back.
func (t *Throttle) settleGroups(grants []ratelimit.Grant, used int) {
	for i := range grants {
		grants[i] = t.Groups[i].Settle(grants[i], used)
	}
}

// stale reports whether g's message tokens are of an epoch that has ended.
func (t *Throttle) stale(g ratelimit.Grant) bool { return staleIn(t.Limiter, g) }

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
func (t *Throttle) giveBack(g ratelimit.Grant) { t.Limiter.Settle(g, 0) }

// renew takes up to n tokens for messages that go on now, from the current
// epoch or, when it has none left, a later one, waiting as a read does, by
// the rule of oneEpoch. With whole, they are all of one epoch; without it
// the caller sends on what it gets and asks again for the rest. The grant is
// the caller's to keep (see keep and spend). renew reports false when ctx
// ends first; a limiter that fails otherwise (closed) lets the messages go
// without tokens.
func (t *Throttle) renew(ctx context.Context, n int, whole bool) (ratelimit.Grant, bool) {
	g, ok, err := t.oneEpoch(ctx, t.Limiter, n, whole, ratelimit.NotThrottled)
	switch {
	case !ok:
		return ratelimit.Grant{}, false
	case err != nil:
		t.env.Logger.Warn("no tokens for messages that go on in a later epoch than their grant's; sending them without", zap.Error(err))
		return ratelimit.GrantOf(n, 0), true
	}
	t.env.Metrics.Retaken.Add(float64(g.Tokens))
	return g, true
}

// oneEpoch takes up to n tokens of lim, all of one epoch, the current one's:
// the rule every token a throttle takes after a read follows. When none are
// left it waits for them (told to Pauses under the limiter's reason). A
// grant of an epoch that has ended (the limiter has yet to begin the
// current one) is given back and asked for again: oneEpoch never returns
// one. With whole, an epoch that has fewer than n left is given back and
// waited out for the next (told to Pauses as waitReason, unless that is
// NotThrottled), and only a grant of a later epoch than the first asked
// (the share is smaller than n) has fewer than n. It reports false when ctx ends first, and returns the limiter's error
// when it fails otherwise (closed).
func (t *Throttle) oneEpoch(ctx context.Context, lim Limiter, n int, whole bool, waitReason ratelimit.Reason) (ratelimit.Grant, bool, error) {
	first, _ := lim.Epoch()
	for {
		g, reason := lim.TryAcquire(n)
		if g.Tokens == 0 {
			var err error
			t.env.Pauses.Begin(reason)
			g, err = lim.Acquire(ctx, n)
			t.env.Pauses.End(reason)
			switch {
			case ctx.Err() != nil:
				return ratelimit.Grant{}, false, nil
			case err != nil && !errors.Is(err, ratelimit.ErrRateLimited):
				return ratelimit.Grant{}, true, err
			case g.Tokens == 0:
				continue // rate limited: wait again
			}
		}
		if now, _ := lim.Epoch(); g.Epoch() < now {
			// The limiter has yet to begin the current epoch: ask again soon.
			lim.Settle(g, 0)
			if !t.sleep(ctx, StaleTokenPause) {
				return ratelimit.Grant{}, false, nil
			}
			continue
		}
		if !whole || g.Tokens >= n || g.Epoch() > first {
			return g, true, nil
		}
		// Fewer than n left in this epoch: all of them from the next.
		lim.Settle(g, 0)
		_, left := lim.Epoch()
		if waitReason != ratelimit.NotThrottled {
			t.env.Pauses.Begin(waitReason)
		}
		slept := t.sleep(ctx, left)
		if waitReason != ratelimit.NotThrottled {
			t.env.Pauses.End(waitReason)
		}
		if !slept {
			return ratelimit.Grant{}, false, nil
		}
		whole = false // a whole epoch's share is all it gets now
	}
}

// StaleTokenPause is how long a throttle waits before it asks again for tokens
// of an epoch that has begun but that the limiter has not yet begun.
const StaleTokenPause = time.Millisecond

// spend keeps every token of g, a grant renew made for messages that go on:
// settled at once, which counts them in shadow, and counted.
func (t *Throttle) spend(g ratelimit.Grant) {
	t.Limiter.Settle(g, g.Tokens)
	t.env.Metrics.Granted.Add(float64(g.Tokens))
}

// Send sends batch, read on tok (see Pay), on with tokens of the epoch it
// goes on in, kept one a message: at once with tok's when its grant's epoch
// is current; otherwise it gives tok's grant back, takes the current epoch's
// (see renew) and sends the batch in parts as tokens come, each with a grant
// of its own, the first with what tok paid. A grant of an epoch that has
// ended is never sent on. send must be done with a part's messages when it
// returns, or copy them. Send returns the messages not sent because hard
// ended before they had tokens.
func (t *Throttle) Send(hard context.Context, tok Tokens, batch []isb.ReadMessage, send func(Tokens, []isb.ReadMessage)) (unsent []isb.ReadMessage) {
	if !t.stale(tok.grant) {
		tok.grant, tok.kept = t.keep(tok.grant, len(batch)), len(batch)
		send(tok, batch)
		return nil
	}
	t.giveBack(tok.grant)
	paid := tok.paid
	first := true
	for len(batch) > 0 {
		ng, ok := t.renew(hard, len(batch), false)
		if !ok {
			return batch
		}
		k := min(max(ng.Tokens, 1), len(batch))
		if first && k < len(batch) {
			// The parts after the first go on after it was handed over,
			// which may reuse batch's buffer.
			batch = append(batch[:k:k], slices.Clone(batch[k:])...)
		}
		first = false
		send(Tokens{t: t, grant: t.keep(ng, k), kept: k, paid: paid}, batch[:k])
		paid = payment{}
		batch = batch[k:]
	}
	return nil
}

// RenewAll takes n tokens, all of one epoch when it can (see renew), for n
// messages of tok's batch delivered again, and keeps them as a read's (see
// keep): tok goes on with them, for the n messages, and with what the batch
// paid. It reports false when hard ends first.
func (tok *Tokens) RenewAll(hard context.Context, n int) bool {
	t := tok.t
	g, ok := t.renew(hard, n, true)
	if !ok {
		return false
	}
	tok.grant, tok.kept = t.keep(g, g.Tokens), n
	return true
}

// Retake takes n tokens from the limiter, waiting for them as a read does,
// for messages to send again after a throttle signal, from epoch from or a
// later one. Their first tokens were spent on the attempt the sink refused,
// in an epoch that has passed when its Retry-After has: sent on those, they
// would come on top of the current epoch's grant, and the sink would see
// more than the limit in a second. It reports false when hard ends first; a
// limiter that fails otherwise (closed) lets the messages go without tokens.
// The retry is written on the last grant it took, of the epoch the messages
// go on in: tok holds it.
func (tok *Tokens) Retake(hard context.Context, n int, from int64) bool {
	g, ok := tok.t.retake(hard, n, from)
	if ok && g.Tokens > 0 {
		tok.grant = g
	}
	return ok
}

// retake takes n tokens for Retake and returns the last grant it took.
func (t *Throttle) retake(hard context.Context, n int, from int64) (ratelimit.Grant, bool) {
	var g ratelimit.Grant
	for n > 0 {
		if e, left := t.Limiter.Epoch(); e < from {
			if !t.sleep(hard, left) {
				return g, false
			}
			continue
		}
		var ok bool
		if g, ok = t.renew(hard, n, true); !ok {
			return g, false
		}
		t.spend(g)
		n -= max(g.Tokens, 1)
	}
	return g, true
}
