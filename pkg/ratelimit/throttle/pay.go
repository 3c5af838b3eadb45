package throttle

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// A read batch's sizes and costs are known only once it is read, so it pays
// for them after the read and before it goes on (Pay): its payload bytes
// from the byte limit (Bytes, rateLimit.bytes), and from the message limit
// the cost of each message (Cost, rateLimit.cost) beyond the one token per
// message taken before the read, or back when the costs come to less. Each
// limit's tokens are taken all of one epoch when they can be: when the
// current epoch has fewer left than the batch needs, the throttle gives back
// what it got and waits for the next epoch. When a whole epoch's share is
// still too little (a batch, or a message, bigger than the replica's share
// of an epoch) it keeps what each epoch grants and collects tokens over as
// many epochs as it needs, then goes on: no epoch grants more than its
// share, and the epoch the batch goes on in carries all of its bytes. The
// waits are told to Pauses as rate_limited.
//
// A vertex in shared limits (Groups) knows what a batch costs each of them
// before the read, a token a message, and takes them then (takeGroups): no
// more is read than every limit allows.

// payment is what a batch paid after its read: the last grants of its bytes,
// of its cost beyond one token a message and of each group, settled, so
// that dropped messages can give theirs back (Refund). The zero value paid
// nothing.
type payment struct {
	bytes, cost ratelimit.Grant
	groups      []ratelimit.Grant // in the order of Throttle.Groups
	// nBytes and nCost are what the batch carries of each, less what its
	// dropped messages gave back: what it pays again when it goes on in a
	// later epoch than bytes' or cost's (see repay).
	nBytes, nCost int
}

// pays reports whether reads pay after the read for their bytes or cost.
func (t *Throttle) pays() bool { return t.Bytes != nil || t.Cost != nil }

// costOf returns the cost of m (1 when the cost expression gives none,
// counted in CostErrors).
func (t *Throttle) costOf(m *isb.Message) int {
	c, err := t.Cost(m)
	if err != nil {
		t.env.Metrics.CostErrors.Inc()
		if !t.costLog.Swap(true) {
			t.env.Logger.Warn("the cost expression gave no cost; such messages cost 1 (logged once)", zap.Error(err))
		}
		return 1
	}
	return c
}

// Pay settles tok, taken for a read (see Take), after the read of batch:
// the groups keep a token a message read, an empty read gives all of tok
// back, and a batch pays its bytes and its cost beyond a token a message
// (see pay). It returns the tokens the batch goes on with (see Send), and
// reports false, having given every token back, when hard ends first.
func (t *Throttle) Pay(hard context.Context, tok Tokens, batch []isb.ReadMessage) (Tokens, bool) {
	t.settleGroups(tok.paid.groups, len(batch))
	if len(batch) == 0 {
		t.keep(tok.grant, 0) // unused tokens go back, same epoch
		return Tokens{t: t}, true
	}
	if !t.pays() {
		return tok, true
	}
	g, p, ok := t.pay(hard, tok.grant, batch, tok.paid.groups)
	if !ok {
		t.keep(g, 0)
		t.settleGroups(p.groups, 0)
		return Tokens{t: t}, false
	}
	return Tokens{t: t, grant: g, paid: p}, true
}

// pay takes the bytes and the extra cost of batch, read on g with the
// groups' grants groups, and returns g less the tokens a batch that costs
// less than a token a message gives back, and what the batch paid. It
// reports false when hard ends first.
func (t *Throttle) pay(hard context.Context, g ratelimit.Grant, batch []isb.ReadMessage, groups []ratelimit.Grant) (ratelimit.Grant, payment, bool) {
	p := payment{groups: groups}
	var bytes, cost int
	switch {
	case t.Cost == nil:
		for i := range batch {
			bytes += len(batch[i].Value)
		}
	case t.Bytes == nil:
		for i := range batch {
			cost += t.costOf(&batch[i].Message)
		}
	default:
		for i := range batch {
			bytes += len(batch[i].Value)
			cost += t.costOf(&batch[i].Message)
		}
	}
	ok := true
	if t.Bytes != nil && bytes > 0 {
		p.bytes, ok = t.take(hard, t.Bytes, bytes)
		if ok {
			p.nBytes = bytes
			t.env.Metrics.Bytes.Add(float64(bytes))
		}
	}
	if extra := cost - len(batch); t.Cost != nil && ok {
		switch {
		case extra > 0:
			p.cost, ok = t.take(hard, t.Limiter, extra)
			if ok {
				p.nCost = extra
				t.env.Metrics.Granted.Add(float64(extra))
			}
			// When the wait for the cost ended the bytes' epoch, the
			// batch pays its bytes again as it is written (repay).
		case extra < 0:
			// Messages that cost nothing give their read's tokens back.
			g = t.Limiter.Settle(g, len(batch)+extra)
		}
	}
	return g, p, ok
}

// take takes n tokens of lim for what a batch read, waiting for them as
// the package comment says, and returns the last grant, kept: all of one
// epoch by the rule of oneEpoch while a whole epoch's share may do, and
// else what each epoch grants, over as many as it takes. It reports false
// when hard ends first; a limiter that fails otherwise (closed) lets the
// batch go without.
func (t *Throttle) take(hard context.Context, lim Limiter, n int) (ratelimit.Grant, bool) {
	var last ratelimit.Grant
	whole := true // until a whole epoch's share has proved too little
	for n > 0 {
		g, ok, err := t.oneEpoch(hard, lim, n, whole, ratelimit.ReasonRateLimited)
		switch {
		case !ok:
			return last, false
		case err != nil:
			t.env.Logger.Warn("no tokens for a read's bytes or cost; sending it without", zap.Error(err))
			return last, true
		}
		whole = whole && g.Tokens >= n
		last = lim.Settle(g, g.Tokens)
		n -= g.Tokens
	}
	return last, true
}

// Freshen makes the tokens a write of n messages to the sink is written on,
// tok's grant, those of the current epoch, for up to the messages tok
// keeps, and pays again what the batch paid (repay).
// Called before the write, it renews the tokens of a batch whose grant is
// of an epoch that has ended (a slow function, a batch that waited for its
// turn to write); called after it, those of a write that returned in a later
// epoch than the one it started in (a stalled sink): the messages may have
// reached the downstream in it, and what is read next in it must leave room
// for them. Either way it takes the current epoch's tokens for up to n
// messages, all of one epoch (see renew), keeps them and makes them tok's
// grant. It reports false when hard ends first. Writes and their calls to
// Freshen go one at a time.
func (tok *Tokens) Freshen(hard context.Context, n int) bool {
	if n = min(n, tok.kept); n <= 0 {
		return true
	}
	t := tok.t
	if t.stale(tok.grant) {
		ng, ok := t.renew(hard, n, true)
		if !ok {
			return false
		}
		t.spend(ng)
		tok.grant = ng
	}
	return t.repay(hard, &tok.paid)
}

// repay pays again, for the batch in progress, the bytes and the extra
// cost it carries when it goes on in a later epoch than the one it paid
// them in (a slow function, a batch that waited for its turn to write, a
// write that returned in a later epoch): the same amounts, from the current
// epoch, all of one epoch (see take), as its message tokens are taken again
// (Freshen). It reports false when hard ends first.
func (t *Throttle) repay(hard context.Context, p *payment) bool {
	return t.payAgain(hard, t.Bytes, &p.bytes, p.nBytes, t.env.Metrics.Bytes) &&
		t.payAgain(hard, t.Limiter, &p.cost, p.nCost, t.env.Metrics.Granted, t.env.Metrics.Retaken)
}

// payAgain takes n tokens of lim from the current epoch for a batch whose
// grant *g of them is of an epoch that has ended, makes them *g and counts
// them in counted. It reports false when hard ends first.
func (t *Throttle) payAgain(hard context.Context, lim Limiter, g *ratelimit.Grant, n int, counted ...prometheus.Counter) bool {
	if n <= 0 || !staleIn(lim, *g) {
		return true
	}
	ng, ok := t.take(hard, lim, n)
	if !ok {
		return false
	}
	*g = ng
	for _, c := range counted {
		c.Add(float64(n))
	}
	return true
}

// Refundable reports whether tok paid, after its read, tokens that dropped
// messages could give back (see Refund).
func (tok *Tokens) Refundable() bool { return tok.paid.refundable() }

// refundable reports whether p holds tokens that dropped messages could give
// back.
func (p *payment) refundable() bool {
	return p.bytes.Tokens != 0 || p.cost.Tokens != 0 || len(p.groups) != 0
}

// Refund gives back, with excludeDropped, the bytes, the extra cost and the
// groups' tokens the dropped messages of batch, tok's batch, paid: those i
// for which goesOn[i] is false. They go back to the epoch of the batch's
// last grant, while it is current.
func (tok *Tokens) Refund(batch []isb.ReadMessage, goesOn []bool) {
	t, p := tok.t, &tok.paid
	var bytes, cost, dropped int
	for i := range batch {
		if goesOn[i] {
			continue
		}
		dropped++
		bytes += len(batch[i].Value)
		if t.Cost != nil && p.cost.Tokens > 0 {
			cost += t.costOf(&batch[i].Message) - 1
		}
	}
	p.nBytes = max(p.nBytes-bytes, 0)
	p.nCost = max(p.nCost-cost, 0)
	if b := min(bytes, p.bytes.Tokens); b > 0 {
		p.bytes = t.Bytes.Settle(p.bytes, p.bytes.Tokens-b)
		t.env.Metrics.BytesDeposited.Add(float64(b))
	}
	if c := min(cost, p.cost.Tokens); c > 0 {
		p.cost = t.Limiter.Settle(p.cost, p.cost.Tokens-c)
		t.env.Metrics.Deposited.Add(float64(c))
	}
	for i, g := range p.groups {
		if d := min(dropped, g.Tokens); d > 0 {
			p.groups[i] = t.Groups[i].Settle(g, g.Tokens-d)
		}
	}
}
