package ratelimit

import "github.com/sluiceflow/sluice/pkg/ratelimit/share"

// membership is a replica's side of the agreement on who the replicas are (see share.Store): what it reports
// to the store, the views it learned, and from which epoch each one applies. The
// Limiter calls it with its mutex held.
type membership struct {
	solo bool // no store: the only replica, always eligible
	// A set of fixedSize replicas known in advance, this one of rank fixedRank.
	fixedSize, fixedRank int

	report       int   // replica count to report at the next sync
	agreed       bool  // has seen AGREE at least once
	eligibleFrom int64 // first epoch in which the replica may take tokens

	// The two most recent views, stamped with the epoch they were learned in. A view
	// learned in epoch s applies from epoch s+1.
	latest, prev stampedView
}

type stampedView struct {
	ok    bool
	stamp int64
	size  int // replica count in use
	rank  int
}

// learn applies the consensus rule to a view the store returned in epoch stamp:
// on AGREE use the agreed size; on DISAGREE use the largest of the current, the
// reported and the live sizes, and the larger of the current and the store's
// ranks (a smaller share is always safe: a store that lost replicas' writes
// ranks the caller too low), and report the live count, so that every
// replica converges on it.
func (m *membership) learn(v share.View, stamp int64) {
	size, rank := v.Replicas, v.Rank
	if v.Agreed {
		m.report = v.Replicas
		if !m.agreed {
			m.agreed = true
			m.eligibleFrom = stamp + 1
		}
	} else {
		size = max(v.Replicas, v.Live, m.latest.size)
		if m.latest.ok {
			rank = max(rank, m.latest.rank)
		}
		m.report = v.Live
	}
	sv := stampedView{ok: true, stamp: stamp, size: size, rank: rank}
	if m.latest.ok && m.latest.stamp < stamp {
		m.prev = m.latest
	}
	m.latest = sv
}

// rejoin forgets that the replicas agreed on this one: it was away past its
// lease, and the others may have agreed on a replica count without it since. It takes
// no tokens until it sees the replicas agree again, from the epoch after.
func (m *membership) rejoin() { m.agreed = false }

// at returns the replica count and rank that apply in epoch e, and whether the replica
// may take tokens in it.
func (m *membership) at(e int64) (size, rank int, eligible bool) {
	if m.solo {
		return 1, 0, true
	}
	if m.fixedSize > 0 {
		return m.fixedSize, m.fixedRank, true
	}
	v := m.latest
	if v.stamp >= e {
		v = m.prev
	}
	if !v.ok || !m.agreed || e < m.eligibleFrom {
		return v.size, v.rank, false
	}
	return v.size, v.rank, true
}
