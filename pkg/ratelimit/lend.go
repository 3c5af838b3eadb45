package ratelimit

import (
	"sync/atomic"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// lendState is a replica's side of the exchange of spare tokens
// (Config.Lend): what it lends at a sync (report), what it borrows from the
// reply (borrow), and what it granted, to tell an idle replica from a busy
// one. l.mu guards it but for the totals, which are atomic.
type lendState struct {
	region string
	// The epoch and the tokens granted in it at the last sync, to tell
	// whether the replica granted any since.
	markEpoch   int64
	markGranted int64
	// endedActive is whether the replica granted tokens in the last epoch
	// that ended after the last sync.
	endedActive bool
	// Totals since the start, for Status.
	lent, borrowed atomic.Int64
}

// report takes the tokens the replica lends at this sync out of st, the
// current epoch, and returns the lend to report, or nil when it neither
// lends nor asks; waiters are the callers waiting for tokens, and
// reservePct is Config.ReservePercentage. l.mu is held.
func (s *lendState) report(st *epochState, waiters []*waiter, reservePct int) *share.Lend {
	granted := st.granted()
	idle := granted == s.markGranted
	if st.epoch != s.markEpoch {
		idle = granted == 0 && !s.endedActive
	}
	dry := st.dry.Swap(false) || len(waiters) > 0
	s.markEpoch, s.markGranted = st.epoch, granted
	if !st.eligible || st.held || st.closed || st.revoked {
		return nil
	}
	r := &share.Lend{Epoch: st.epoch, Region: s.region}
	switch {
	case dry:
		r.Want = max(st.share, 1)
		for _, w := range waiters {
			r.Want = max(r.Want, w.n)
		}
	case idle:
		keep := mulDiv(st.share, int64(reservePct), 100)
		if give := st.unspent() - keep; give > 0 {
			r.Give = st.gather(give, noLane)
			st.given += r.Give
			s.lent.Add(r.Give)
		}
	}
	if r.Give == 0 && r.Want == 0 {
		return nil
	}
	return r
}

// ended notes, as epoch st ends, whether the replica granted tokens in it
// since its last sync, when it lends (on). l.mu is held.
func (s *lendState) ended(st *epochState, on bool) {
	if !on {
		return
	}
	g := st.granted()
	s.endedActive = st.dry.Load() || (g > 0 && (st.epoch != s.markEpoch || g != s.markGranted))
}

// borrow takes the tokens the store lent for r's epoch into st, the current
// epoch, when it is still r's, and returns them, for the owner to hand out
// (waiting callers first); it returns 0 for none, and for tokens of an epoch
// that has ended, which are dropped. l.mu is held.
func (s *lendState) borrow(st *epochState, r *share.Lend, lent int64) int64 {
	if r == nil || lent <= 0 {
		return 0
	}
	if st.epoch != r.Epoch || !st.eligible || st.held || st.closed || st.revoked {
		return 0
	}
	st.received += lent
	s.borrowed.Add(lent)
	return lent
}
