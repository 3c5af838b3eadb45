package ratelimit

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"github.com/sluiceflow/sluice/pkg/clock"

	"go.uber.org/zap"
)

// link is a replica's side of its store: what it syncs with, how often, and
// how its syncs go. store, id and interval are set once; l.mu guards the
// rest.
type link struct {
	store    share.Store // nil without one
	id       string
	interval time.Duration
	// ctx is the parent of every sync's context, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc
	timer  clock.Timer // the next sync

	fail       error     // the last sync's error, nil after a success
	fails      int       // consecutive failed syncs
	registered bool      // has synced with the store once
	storeLease time.Time // the lease deadline the store recorded at the last sync (share.Report.LeaseUntil)
	held       time.Time // the end of the store's hold the last sync saw (share.View.Held)
	lease      lease     // how long the last agreed view may be used
	agreedSize int       // the last replica count agreed, for logging changes
	syncs      int64     // calls to the store so far
}

// maxSyncBackoff is the longest a replica waits between syncs while its store
// fails, so that it is back within a second of the store.
const maxSyncBackoff = 400 * time.Millisecond

// syncOnce reports to the store and learns the store's view of the replicas. It does the store call
// without the mutex.
func (l *Limiter) syncOnce() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var lend *share.Lend
	if l.cfg.Lend && l.link.store != nil {
		lend = l.lend.report(l.state.Load(), l.wait.list, l.cfg.ReservePercentage)
	}
	rep := share.Report{ID: l.link.id, Replicas: l.member.report, StaleAfter: l.cfg.StaleAfter, Signal: l.quota.signals.pending, Limit: l.live.proposal,
		Lend: lend, LeaseUntil: l.link.storeLease}
	l.quota.signals.pending = nil
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(l.link.ctx, max(l.link.interval, time.Second))
	t0 := l.clk.Now()
	v, err := l.link.store.Sync(ctx, rep)
	t1 := l.clk.Now()
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.link.syncs++
	if l.closed {
		return ErrClosed
	}
	if err != nil {
		l.quota.unsent(rep.Signal)
		l.link.failed(err, l.log, l.cfg)
		return err
	}
	if l.link.fail != nil {
		l.log.Info("store is reachable again", zap.Int("failedSyncs", l.link.fails))
	}
	l.link.fail, l.link.fails = nil, 0
	// A replica whose lease ran out before this reply came may have been left
	// out of the replicas by the others: it rejoins, taking no tokens until the
	// replicas agree on it again, and none in the current epoch.
	away := l.link.registered && l.link.lease.ran(t1)
	// The lease runs from before the request: the store saw this heartbeat no
	// earlier, so the replica stops using its view before the store drops it.
	l.link.lease.renew(t0, l.cfg.StaleAfter)
	l.link.storeLease = v.Time.Add(rep.Lease())
	if !v.Held.IsZero() && l.link.held.IsZero() {
		l.log.Warn("the store lost its last writes (a failover or a restart): no replica count agrees until the leases it may have forgotten have run out; the count agreed last stays in use",
			zap.Time("until", v.Held), zap.Int("poolSize", l.member.latest.size))
	}
	l.link.held = v.Held
	if away && l.member.agreed {
		l.member.rejoin()
		l.state.Load().revoke()
		l.log.Warn("lease ran out before this sync (frozen, starved or cut off): rejoining the replicas",
			zap.Duration("sinceLastSync", t1.Sub(l.link.lease.last)))
	}
	if step := l.clock.sample(t0, t1, v.Time); step != 0 {
		l.log.Warn("the local clock moved against the store's; epochs follow the store's", zap.Duration("by", -step))
		l.retime(t1)
	}
	l.link.learnHorizon(v.Time, l.cfg.Adaptive, l.clock)
	stamp := floorDiv(v.Time.UnixNano(), epochNanos)
	wasAgreed := l.member.agreed
	l.member.learn(v, stamp)
	switch {
	case !wasAgreed && l.member.agreed:
		l.log.Info("joined the replicas", zap.Int("poolSize", v.Replicas), zap.Int("rank", v.Rank), zap.Int64("fromEpoch", stamp+1))
		l.link.agreedSize = v.Replicas
	case v.Agreed && l.link.agreedSize != v.Replicas:
		l.log.Info("replica count agreed", zap.Int("poolSize", v.Replicas), zap.Int("rank", v.Rank), zap.Int64("fromEpoch", stamp+1))
		l.link.agreedSize = v.Replicas
	}
	// A replica that rejoins applies the last cut it missed from its next
	// epoch: its pool is then no larger than the others', which applied it
	// earlier and ramped on since.
	if until := l.quota.adapt(v.Adaptation, stamp, !l.link.registered); until != 0 {
		l.pauseTo(until, t1)
	}
	if rep.Limit != nil && l.live.proposal == rep.Limit {
		l.live.proposal = nil // taken; a change since is sent at the next sync
	}
	if l.live.learn(v.Limits, !l.link.registered, l.cfg, l.state.Load().epoch) {
		l.syncSoon()
	}
	st := l.state.Load()
	if n := l.lend.borrow(st, rep.Lend, v.Lent); n > 0 {
		l.wait.hand(st, n) // waiting callers first
	}
	if !l.link.registered {
		l.link.registered = true
		// The replica has taken no tokens yet: it is not in an agreed replica set before
		// this sync. Its ramp starts from the saved pool at the next epoch.
		if l.cfg.ResumedRampUp && v.Resume > 0 {
			l.ramp.resume(v.Resume, stamp+1)
			l.log.Info("resuming the ramp where the last replica left it", zap.Float64("pool", float64(v.Resume)/milli))
		}
	}
	return nil
}

// failed notes a failed sync, and logs the first of a run, with the
// replica's cfg. l.mu is held.
func (k *link) failed(err error, log *zap.Logger, cfg Config) {
	switch {
	case k.fail != nil:
	case !k.registered:
		log.Warn("store unreachable; taking no tokens until the replica registers", zap.Error(err))
	default:
		log.Warn("store unreachable; using the last agreed replica count while the lease lasts",
			zap.Error(err), zap.Duration("lease", cfg.StaleAfter), zap.Stringer("onStoreFailure", cfg.OnStoreFailure))
	}
	k.fail = err
	k.fails++
}

// scheduleSync arms the timer of the next sync, d from now. The first sync
// registers the replica and, when that succeeds, reports the live count at once:
// a replica alone in its store agrees at the second sync. A store that cannot be
// reached is retried, backing off to maxSyncBackoff. l.mu is held.
func (l *Limiter) scheduleSync(d time.Duration, first bool) {
	l.link.timer = l.timers.after(d, func() {
		defer l.notifyEnded() // of an epoch a step of the clock ended
		if err := l.syncOnce(); err == nil && first {
			l.syncOnce()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			l.scheduleSync(l.link.nextSync(), !l.link.registered)
		}
	})
}

// nextSync is the time until the next sync: the sync interval, or longer while
// the store fails. l.mu is held.
func (k *link) nextSync() time.Duration {
	if k.fails == 0 {
		return k.interval
	}
	return min(k.interval<<min(k.fails, 10), max(maxSyncBackoff, k.interval))
}

// leave tells the store the replica is gone, saving its pool for a replica that
// resumes the ramp.
func (k *link) leave(ctx context.Context, p int64, staleAfter time.Duration) error {
	if k.store == nil {
		return nil
	}
	return k.store.Leave(ctx, share.Report{ID: k.id, Pool: p, StaleAfter: staleAfter})
}
