package ratelimit

import (
	"time"

	"go.uber.org/zap"
)

// A replica's lease is how long it may go on using the last view of the replicas
// it agreed on without hearing from its store: from the start of its last
// successful sync, Config.StaleAfter less a margin, by its own clock. The
// store drops the replica StaleAfter after it saw that sync's heartbeat, by
// the store's clock; the others take its share only at the epoch after they
// agree without it. So a replica stops using its share at least the margin
// before the others can take it, whatever happened in between: a store that
// cannot be reached, a network that drops or holds its packets, or the
// replica itself frozen (a stop-the-world pause, a container starved by its
// CPU limit, a VM migrated live, SIGSTOP) so that it does not notice the time
// pass until it runs again.
//
// Once the lease has run out the replica grants nothing until it has synced
// again and seen the replicas agree on a count that includes it: it rejoins as a
// new replica does, because the others may have shared the pool without it.
// The one exception is Config.OnStoreFailure LastKnown while the replica
// sees its syncs fail: it keeps the last agreed replica count then, availability
// first, and rejoins when the store answers.
//
// With Config.Adaptive the view a replica learned at a sync is complete only
// for a while: a cut the store decides later applies from the first epoch
// that begins two sync intervals after (share.Signal.Lead), so a replica knows every
// cut of the epochs that begin before that lead has passed since its last
// sync, and no more. It grants in no later epoch until it has synced again,
// as when its lease has run out, but it need not rejoin: the others have not
// left it out of the replicas. Live changes of the limit apply a whole lease
// after the store takes them (liveLead), so a replica that cannot learn of
// one has stopped granting by then.

// lease is a replica's lease with its store. The Limiter's mutex guards it.
type lease struct {
	last   time.Time     // local time at which the last successful sync began
	until  time.Time     // local time at which the lease runs out
	known  time.Time     // with Adaptive: local time of the first epoch whose cuts it may not know
	margin time.Duration // taken off StaleAfter
	logged bool          // the lapse was logged
}

// leaseMargin is the part of a lease a replica gives up so that it stops
// using its share before its store drops it: a quarter of it, at most
// maxLeaseMargin.
func leaseMargin(staleAfter time.Duration) time.Duration {
	return min(staleAfter/4, maxLeaseMargin)
}

// maxLeaseMargin caps the lease margin.
const maxLeaseMargin = 250 * time.Millisecond

// renew starts a lease of staleAfter less the margin at t0, the start of a
// successful sync.
func (s *lease) renew(t0 time.Time, staleAfter time.Duration) {
	s.last, s.until = t0, t0.Add(staleAfter-s.margin)
	s.logged = false
}

// ran reports whether the lease has run out at now.
func (s *lease) ran(now time.Time) bool { return !now.Before(s.until) }

// end returns the local time at which the replica stops granting, by its
// lease and, with adaptive, by the cuts it knows of (known).
func (s *lease) end(adaptive bool) time.Time {
	if adaptive && s.known.Before(s.until) {
		return s.known
	}
	return s.until
}

// learnHorizon notes, with Adaptive, the first epoch a cut decided after a
// sync that saw the store's clock at store may apply from. l.mu is held.
func (k *link) learnHorizon(store time.Time, adaptive bool, c *storeClock) {
	if adaptive {
		first := floorDiv(store.Add(2*k.interval).UnixNano(), epochNanos) + 1
		k.lease.known = c.localAt(first * epochNanos)
	}
}

// lapsed reports whether the replica may not use its share at now because
// its lease has run out, or with Adaptive because it may not know of a cut:
// always with Pause, and with LastKnown unless its syncs are failing. It logs
// the lapse once. l.mu is held.
func (l *Limiter) lapsed(now time.Time) bool {
	if l.link.store == nil || !l.link.registered || now.Before(l.link.lease.end(l.cfg.Adaptive)) {
		return false
	}
	if l.cfg.OnStoreFailure == LastKnown && l.link.fail != nil {
		if !l.link.lease.logged && l.member.agreed {
			l.link.lease.logged = true
			l.log.Warn("store lease expired: keeping the last known replica count until the store is back (onStoreFailure: lastKnown)")
		}
		return false
	}
	if !l.link.lease.logged && l.member.agreed {
		l.link.lease.logged = true
		switch {
		case l.link.fail != nil:
			l.log.Warn("store lease expired: taking no tokens until the store is back")
		case l.link.lease.ran(now):
			l.log.Warn("store lease expired without a failed sync (the process was frozen or starved, or a sync hangs): taking no tokens until it rejoins the replicas",
				zap.Duration("sinceLeaseEnd", now.Sub(l.link.lease.until)))
		default:
			l.log.Warn("no sync for longer than a cut's lead: taking no tokens until the store answers, as a cut may apply")
		}
	}
	return true
}

// revoke takes back every token left in st, which the replica may no longer
// grant: its lease ran out in the middle of the epoch. Tokens given back
// later are dropped, and a pause that ends in the epoch does not hand them
// out. l.mu is held.
func (st *epochState) revoke() {
	if !st.eligible || st.closed {
		return
	}
	st.eligible, st.leaseOut, st.revoked = false, true, true
	st.paused.Store(true)
	st.withheld.Add(st.drain())
}
