package ratelimit

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// maxSyncBackoff is the longest a replica waits between syncs while its store
// fails, so that it is back within a second of the store.
const maxSyncBackoff = 400 * time.Millisecond

// syncOnce reports to the store and learns the pool's view. It does the store call
// without the mutex.
func (l *Limiter) syncOnce() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	rep := Report{ID: l.id, PoolSize: l.member.report, StaleAfter: l.cfg.StaleAfter, Signal: l.signal, Limit: l.proposal}
	l.signal = nil
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(l.syncCtx, max(l.sync, time.Second))
	t0 := l.clk.Now()
	v, err := l.store.Sync(ctx, rep)
	t1 := l.clk.Now()
	cancel()

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err != nil {
		l.unsent(rep.Signal)
		l.syncFailed(err)
		return err
	}
	if l.syncFail != nil {
		l.log.Info("store is reachable again", zap.Int("failedSyncs", l.syncFails))
	}
	l.syncFail, l.syncFails, l.leaseLogged = nil, 0, false
	// The lease runs from before the request: the store saw this heartbeat no
	// earlier, so the replica stops using its view no later than the store
	// drops it.
	l.leaseUntil = t0.Add(l.cfg.StaleAfter)
	mid := t0.Add(t1.Sub(t0) / 2)
	l.offset = v.Time.UnixNano() - (l.baseNano + int64(mid.Sub(l.base)))
	stamp := floorDiv(v.Time.UnixNano(), epochNanos)
	wasAgreed := l.member.agreed
	l.member.learn(v, stamp)
	switch {
	case !wasAgreed && l.member.agreed:
		l.log.Info("joined the pool", zap.Int("poolSize", v.PoolSize), zap.Int("rank", v.Rank), zap.Int64("fromEpoch", stamp+1))
		l.agreedSize = v.PoolSize
	case v.Agreed && l.agreedSize != v.PoolSize:
		l.log.Info("pool size agreed", zap.Int("poolSize", v.PoolSize), zap.Int("rank", v.Rank), zap.Int64("fromEpoch", stamp+1))
		l.agreedSize = v.PoolSize
	}
	l.adapt(v.Adaptation, stamp, t1, !l.registered)
	if rep.Limit != nil && l.proposal == rep.Limit {
		l.proposal = nil // taken; a change since is sent at the next sync
	}
	l.learnLimits(v.Limits, !l.registered)
	if !l.registered {
		l.registered = true
		// The replica has taken no tokens yet: it is not in an agreed pool before
		// this sync. Its ramp starts from the saved pool at the next epoch.
		if l.cfg.ResumedRampUp && v.Resume > 0 {
			l.ramp.resume(v.Resume, stamp+1)
			l.log.Info("resuming the ramp where the last replica left it", zap.Float64("pool", float64(v.Resume)/milli))
		}
	}
	return nil
}

// syncFailed notes a failed sync. l.mu is held.
func (l *Limiter) syncFailed(err error) {
	switch {
	case l.syncFail != nil:
	case !l.registered:
		l.log.Warn("store unreachable; taking no tokens until the replica registers", zap.Error(err))
	default:
		l.log.Warn("store unreachable; using the last agreed pool while the lease lasts",
			zap.Error(err), zap.Duration("lease", l.cfg.StaleAfter), zap.Stringer("onStoreFailure", l.cfg.OnStoreFailure))
	}
	l.syncFail = err
	l.syncFails++
}

// leaseExpired reports whether the replica has gone a whole staleAfter without a
// successful sync, logging it once. l.mu is held.
func (l *Limiter) leaseExpired(now time.Time) bool {
	if l.store == nil || l.syncFail == nil || now.Before(l.leaseUntil) {
		return false
	}
	if !l.leaseLogged && l.member.agreed {
		l.leaseLogged = true
		if l.cfg.OnStoreFailure == Pause {
			l.log.Warn("store lease expired: taking no tokens until the store is back")
		} else {
			l.log.Warn("store lease expired: keeping the last known pool until the store is back")
		}
	}
	return true
}

// scheduleSync arms the timer of the next sync, d from now. The first sync
// registers the replica and, when that succeeds, reports the live count at once:
// a replica alone in its pool agrees at the second sync. A store that cannot be
// reached is retried, backing off to maxSyncBackoff. l.mu is held.
func (l *Limiter) scheduleSync(d time.Duration, first bool) {
	l.syncT = l.after(d, func() {
		if err := l.syncOnce(); err == nil && first {
			l.syncOnce()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			l.scheduleSync(l.nextSync(), !l.registered)
		}
	})
}

// nextSync is the time until the next sync: the sync interval, or longer while
// the store fails. l.mu is held.
func (l *Limiter) nextSync() time.Duration {
	if l.syncFails == 0 {
		return l.sync
	}
	return min(l.sync<<min(l.syncFails, 10), max(maxSyncBackoff, l.sync))
}

// leave tells the store the replica is gone, saving its pool for a replica that
// resumes the ramp.
func (l *Limiter) leave(ctx context.Context, pool int64) error {
	if l.store == nil {
		return nil
	}
	return l.store.Leave(ctx, Report{ID: l.id, Pool: pool, StaleAfter: l.cfg.StaleAfter})
}
