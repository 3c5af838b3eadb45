package forward

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// A read batch's sizes and costs are known only once it is read, so it pays
// for them after the read and before it goes on (pay): its payload bytes
// from the byte limit (Deps.Bytes, rateLimit.bytes), and from the message
// limit the cost of each message (Deps.Cost, rateLimit.cost) beyond the one
// token per message taken before the read, or back when the costs come to
// less. Each limit's tokens are taken all of one epoch when they can be: when
// the current epoch has fewer left than the batch needs, the forwarder gives
// back what it got and waits for the next epoch. When a whole epoch's share
// is still too little (a batch, or a message, bigger than the replica's share
// of an epoch) it keeps what each epoch grants and collects tokens over as
// many epochs as it needs, then goes on: no epoch grants more than its share,
// and the epoch the batch goes on in carries all of its bytes. The waits are
// tracked as rate_limited.
//
// A vertex in shared limits (Deps.Groups) knows what a batch costs each of
// them before the read, a token a message, and takes them then (takeGroups):
// no more is read than every limit allows.

// payment is what a batch paid after its read: the last grants of its bytes,
// of its cost beyond one token a message and of each group, settled, so
// that dropped messages can give theirs back (Options.ExcludeDropped).
type payment struct {
	bytes, cost ratelimit.Grant
	groups      []ratelimit.Grant // in the order of Deps.Groups
	// nBytes and nCost are what the batch carries of each, less what its
	// dropped messages gave back: what it pays again when it goes on in a
	// later epoch than bytes' or cost's (see repay).
	nBytes, nCost int
}

// paid reports whether reads pay after the read for their bytes or cost.
func (f *Forwarder) paid() bool { return f.th.Bytes != nil || f.th.Cost != nil }

// takeGroups takes as many tokens of every group as g holds and returns g
// and the groups' grants cut to the fewest any of them granted: the read
// takes no more. When a group has none left, it gives back all it holds
// (the read's tokens would go stale while it waits), waits until that group
// has tokens again (counted under the reason the group gives), and starts
// over, with the vertex's tokens taken as a read takes them. When ctx ends
// first, it returns no tokens.
func (f *Forwarder) takeGroups(ctx context.Context, g ratelimit.Grant) (ratelimit.Grant, []ratelimit.Grant) {
	want := g.Tokens
	grants := make([]ratelimit.Grant, len(f.th.Groups))
	for {
		n, empty := g.Tokens, -1
		var reason ratelimit.Reason
		for i, grp := range f.th.Groups {
			grants[i], reason = grp.TryAcquire(n)
			if grants[i].Tokens == 0 {
				empty = i
				break
			}
			n = min(n, grants[i].Tokens)
		}
		if empty < 0 {
			for i, grp := range f.th.Groups {
				grants[i] = grp.Settle(grants[i], n)
			}
			if n < g.Tokens {
				g = f.th.Limiter.Settle(g, n)
			}
			return g, grants
		}
		f.th.Limiter.Settle(g, 0)
		for i := range empty {
			f.th.Groups[i].Settle(grants[i], 0)
		}
		grp := f.th.Groups[empty]
		f.d.Tracker.Begin(reason)
		gg, err := grp.Acquire(ctx, 1) // waits until the group has tokens again
		f.d.Tracker.End(reason)
		grp.Settle(gg, 0)
		if ctx.Err() != nil {
			return ratelimit.Grant{}, make([]ratelimit.Grant, len(f.th.Groups))
		}
		if err != nil && !errors.Is(err, ratelimit.ErrRateLimited) {
			f.log.Warn("no tokens of a shared limit; reading without it", zap.Error(err))
			g, _ = f.acquire(ctx, want)
			return g, make([]ratelimit.Grant, len(f.th.Groups))
		}
		if g, err = f.acquire(ctx, want); err != nil || g.Tokens == 0 {
			return ratelimit.Grant{}, make([]ratelimit.Grant, len(f.th.Groups))
		}
	}
}

// costOf returns the cost of m (1 when the cost expression gives none,
// counted as an error of stage cost).
func (f *Forwarder) costOf(m *isb.Message) int {
	c, err := f.th.Cost(m)
	if err != nil {
		f.d.Metrics.Errors.WithLabelValues(StageCost).Inc()
		if !f.costLog.Swap(true) {
			f.log.Warn("the cost expression gave no cost; such messages cost 1 (logged once)", zap.Error(err))
		}
		return 1
	}
	return c
}

// pay takes the bytes and the extra cost of batch, read on g, and returns
// g less the tokens a batch that costs less than a token a message gives
// back. It reports false when hard ends first.
func (f *Forwarder) pay(hard context.Context, g ratelimit.Grant, batch []isb.ReadMessage) (ratelimit.Grant, payment, bool) {
	var bytes, cost int
	switch {
	case f.th.Cost == nil:
		for i := range batch {
			bytes += len(batch[i].Value)
		}
	case f.th.Bytes == nil:
		for i := range batch {
			cost += f.costOf(&batch[i].Message)
		}
	default:
		for i := range batch {
			bytes += len(batch[i].Value)
			cost += f.costOf(&batch[i].Message)
		}
	}
	var p payment
	ok := true
	if f.th.Bytes != nil && bytes > 0 {
		p.bytes, ok = f.take(hard, f.th.Bytes, bytes)
		if ok {
			p.nBytes = bytes
			f.d.Metrics.Bytes.Add(float64(bytes))
		}
	}
	if extra := cost - len(batch); f.th.Cost != nil && ok {
		switch {
		case extra > 0:
			p.cost, ok = f.take(hard, f.th.Limiter, extra)
			if ok {
				p.nCost = extra
				f.d.Metrics.Granted.Add(float64(extra))
			}
			// When the wait for the cost ended the bytes' epoch, the
			// batch pays its bytes again as it is written (repay).
		case extra < 0:
			// Messages that cost nothing give their read's tokens back.
			g = f.th.Limiter.Settle(g, len(batch)+extra)
		}
	}
	return g, p, ok
}

// take takes n tokens of lim for what a batch read, waiting for them as
// the package comment says, and returns the last grant, kept. It reports
// false when hard ends first; a limiter that fails otherwise (closed) lets
// the batch go without.
func (f *Forwarder) take(hard context.Context, lim Limiter, n int) (ratelimit.Grant, bool) {
	var last ratelimit.Grant
	whole := true // until a whole epoch's share has proved too little
	for n > 0 {
		g, reason := lim.TryAcquire(n)
		if g.Tokens == 0 {
			var err error
			f.d.Tracker.Begin(reason)
			g, err = lim.Acquire(hard, n)
			f.d.Tracker.End(reason)
			switch {
			case hard.Err() != nil:
				return last, false
			case err != nil && !errors.Is(err, ratelimit.ErrRateLimited):
				f.log.Warn("no tokens for a read's bytes or cost; sending it without", zap.Error(err))
				return last, true
			case g.Tokens == 0:
				continue
			}
			whole = false // the epoch's first grant to this caller: all it gets
		}
		if g.Tokens < n && whole {
			// Fewer than n left in this epoch: all of them from the next.
			lim.Settle(g, 0)
			whole = false
			_, left := lim.Epoch()
			f.d.Tracker.Begin(ratelimit.ReasonRateLimited)
			waited := f.sleep(hard, left)
			f.d.Tracker.End(ratelimit.ReasonRateLimited)
			if !waited {
				return last, false
			}
			continue
		}
		last = lim.Settle(g, g.Tokens)
		n -= g.Tokens
	}
	return last, true
}

// repay pays again, for the batch in progress, the bytes and the extra
// cost it carries when it goes on in a later epoch than the one it paid
// them in (a slow function, a batch that waited for its turn to write, a
// write that returned in a later epoch): the same amounts, from the current
// epoch, all of one epoch (see take), as its message tokens are taken again
// (spendOn, chargeFor). It reports false when hard ends first. f.writeMu is
// held.
func (f *worker) repay(hard context.Context) bool {
	return f.payAgain(hard, f.th.Bytes, &f.paid.bytes, f.paid.nBytes, f.d.Metrics.Bytes) &&
		f.payAgain(hard, f.th.Limiter, &f.paid.cost, f.paid.nCost, f.d.Metrics.Granted, f.d.Metrics.Retaken)
}

// payAgain takes n tokens of lim from the current epoch for a batch whose
// grant *g of them is of an epoch that has ended, makes them *g and counts
// them in counted. It reports false when hard ends first.
func (f *worker) payAgain(hard context.Context, lim Limiter, g *ratelimit.Grant, n int, counted ...prometheus.Counter) bool {
	if n <= 0 || !staleIn(lim, *g) {
		return true
	}
	ng, ok := f.take(hard, lim, n)
	if !ok {
		return false
	}
	*g = ng
	for _, c := range counted {
		c.Add(float64(n))
	}
	return true
}

// refund gives back, with Options.ExcludeDropped, the bytes, the extra
// cost and the groups' tokens the dropped messages of batch paid: those that
// none of msgs (what goes on to the sink) or the messages bypass sends to
// the other sinks came from, and that were not nacked. They go back to the
// epoch of the batch's last grant, while it is current.
func (f *worker) refund(batch []isb.ReadMessage, msgs []isb.Message) {
	if f.paid.bytes.Tokens == 0 && f.paid.cost.Tokens == 0 && len(f.paid.groups) == 0 {
		return
	}
	f.gone = zeroedBools(f.gone, len(batch))
	for _, list := range [][]isb.Message{msgs, f.byFallback, f.byOnSuccess} {
		for i := range list {
			if o := list[i].Origin; o >= 0 && o < len(batch) {
				f.gone[o] = true
			}
		}
	}
	var bytes, cost, dropped int
	for i := range batch {
		if f.gone[i] || f.nacks[i] != nil {
			continue
		}
		dropped++
		bytes += len(batch[i].Value)
		if f.th.Cost != nil && f.paid.cost.Tokens > 0 {
			cost += f.costOf(&batch[i].Message) - 1
		}
	}
	f.paid.nBytes = max(f.paid.nBytes-bytes, 0)
	f.paid.nCost = max(f.paid.nCost-cost, 0)
	if b := min(bytes, f.paid.bytes.Tokens); b > 0 {
		f.paid.bytes = f.th.Bytes.Settle(f.paid.bytes, f.paid.bytes.Tokens-b)
		f.d.Metrics.BytesDeposited.Add(float64(b))
	}
	if c := min(cost, f.paid.cost.Tokens); c > 0 {
		f.paid.cost = f.th.Limiter.Settle(f.paid.cost, f.paid.cost.Tokens-c)
		f.d.Metrics.Deposited.Add(float64(c))
	}
	for i, g := range f.paid.groups {
		if d := min(dropped, g.Tokens); d > 0 {
			f.paid.groups[i] = f.th.Groups[i].Settle(g, g.Tokens-d)
		}
	}
}

// zeroedBools returns b resized to n, all false.
func zeroedBools(b []bool, n int) []bool {
	b = append(b[:0], make([]bool, n)...)
	return b
}
