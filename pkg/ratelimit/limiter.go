package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Limiter hands out tokens from a pool of at most Max per one-second epoch, shared
// with the other replicas of its [share.Store] (or alone without one), ramping from Min as
// its [Mode] says. Callers take tokens with [Limiter.Acquire] before they read,
// which waits for tokens, or with [Limiter.TryAcquire], which never waits and says
// why there are none; after the read they keep what they used and give the
// rest back with [Limiter.Settle].
// A [Grant] remembers its epoch, so giving tokens back is exact across epoch
// boundaries: tokens of an epoch that has ended are dropped.
//
// Acquire, TryAcquire and Settle take no lock and read no clock while tokens are
// left: the current epoch's share is kept in atomics that a timer replaces at each
// epoch boundary. Callers that must wait are queued and served in arrival order
// when tokens come.
//
// A Limiter is safe for concurrent use. Create one with [New]; the zero value is not
// usable. Call [Limiter.Close] when done.
type Limiter struct {
	state atomic.Pointer[epochState] // the current epoch; replaced at each boundary
	wait  waitQueue                  // callers waiting for tokens

	cfg    Config
	lanes  laneSet
	clk    clock.Clock
	clock  *storeClock // the store's clock, whose whole seconds are the epochs
	timers timerSet    // the tick and every timer callback, running or pending
	log    *zap.Logger

	mu     sync.Mutex
	closed bool
	ramp   ramp
	member membership
	link   link      // the store, when the limiter shares its pool
	quota  quota     // closed-loop throttling (Config.Adaptive)
	live   liveState // live changes of the limit (Limiter.Update)
	lend   lendState // the exchange of spare tokens (Config.Lend)
	obs    observer  // the epoch observer

	shadow atomic.Int64 // tokens granted in shadow and kept, in all
}

// laneSet is the stripes of a limiter's epochs that its lanes take.
type laneSet struct {
	n    int           // stripes per epoch
	next atomic.Uint32 // lanes handed out
}

// EpochSummary is what one replica did in one epoch, handed to the observer of
// [WithEpochObserver] when the epoch ends, or, for the epoch cut short by
// [Limiter.Close], when the limiter is closed.
type EpochSummary struct {
	Epoch     int64
	PoolMilli int64
	Share     int64
	// Granted is the tokens granted in the epoch, less deposits.
	Granted  int64
	Replicas int
	Rank     int
	// Eligible is false when the replica took no part: joining, or paused.
	Eligible bool
	// Cut is true in the first epoch after a cut of the pool by a throttle
	// signal, and Paused when a signal's pause held the epoch's tokens back
	// for some or all of it.
	Cut, Paused bool
	// ShadowThrottled is the tokens granted in the epoch through a [Gate] in shadow
	// beyond what the limiter granted, less those given back: what it would
	// have throttled.
	ShadowThrottled int64
	// Max and Shadow are the config's in the epoch, and Switched is true in
	// the first epoch of a change by [Limiter.Update].
	Max              int64
	Shadow, Switched bool
}

// Grant is tokens granted in one epoch, returned by [Limiter.Acquire] and
// [Limiter.TryAcquire]; [Limiter.Settle] keeps what the caller used and gives
// the rest back.
// The zero value grants nothing.
type Grant struct {
	// Tokens is the number of tokens granted.
	Tokens int
	epoch  int64
	from   grantFrom
	shadow int // of Tokens, topped up by a Gate in shadow
}

// grantFrom is where a grant's tokens go back to. It is a field of its own
// so that a Grant has four fields, which the compiler keeps in registers: a
// fifth would put every Grant on the stack and triple the cost of Acquire.
type grantFrom struct {
	lane uint32 // the lane that granted it
	// settled is set on a grant Settle returned: settling it again only
	// gives tokens back.
	settled bool
}

// Epoch returns the epoch (whole seconds of the store clock) whose tokens g
// holds.
func (g Grant) Epoch() int64 { return g.epoch }

// GrantOf returns a grant of tokens from epoch, for limiters that stand in
// for a Limiter (tests, wrappers).
func GrantOf(tokens int, epoch int64) Grant { return Grant{Tokens: tokens, epoch: epoch} }

// maxRequest caps a single request so that taken never overflows.
const maxRequest = MaxTokens

// New returns a Limiter for cfg, which must be valid (see [Config.Validate]). It
// does no I/O: with [WithStore] the limiter registers with the store from a
// background goroutine, starting at once, and takes no tokens until the replicas
// agree on a replica count that includes it.
func New(cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Limiter{cfg: cfg, clk: o.clock, log: o.log}
	l.timers.clk, l.timers.fire = o.clock, l.onTick
	l.lanes.n = laneSlots()
	l.link.store, l.link.id, l.link.interval = o.store, o.id, o.syncInterval
	l.quota.cfg, l.quota.log = newQuotaConfig(cfg, o.store != nil, o.unpaced), o.log
	l.lend.region = o.region
	l.live.lead, l.live.log = l.link.liveLead(cfg.StaleAfter), o.log
	l.obs.fn = o.observe
	l.clock = newStoreClock(l.clk.Now())
	l.link.lease.margin = leaseMargin(cfg.StaleAfter)
	l.member.solo = l.link.store == nil && o.fixedSize == 0
	l.member.fixedSize, l.member.fixedRank = o.fixedSize, o.fixedRank
	l.link.ctx, l.link.cancel = context.WithCancel(context.Background())

	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	start := l.clock.epochAt(now)
	l.ramp = newRamp(cfg, start)
	l.state.Store(l.newEpoch(start, now))
	l.timers.arm(l.untilTick(now))
	if l.link.store != nil {
		// The replica's config is the vertex's limit unless another replica's
		// is the same: the last to start or change sets it (see share.LimitChange).
		l.live.propose(cfg.liveSpec())
		l.scheduleSync(0, true)
	}
	return l, nil
}

// Acquire takes up to n tokens: min(n, tokens left in this replica's share of the
// current epoch), and returns them as a [Grant] that remembers its epoch. When none
// are left it waits for the next epoch, in arrival order with other waiting
// callers. When ctx's deadline comes before the next epoch it returns no tokens at
// once with a [*ThrottledError], which matches [ErrRateLimited] and says why and
// how long to wait. Acquire(ctx, 0) grants nothing and counts as a call for the
// ramp. While tokens are left Acquire returns them without looking at ctx.
//
// Goroutines that acquire in a loop at the same time should each use a [Lane].
func (l *Limiter) Acquire(ctx context.Context, n int) (Grant, error) {
	return l.acquire(ctx, n, 0)
}

// TryAcquire takes up to n tokens without waiting: what is left of this epoch's
// share now, possibly fewer than n, with [NotThrottled]. When it can grant nothing
// it returns no tokens and the reason a caller of Acquire would wait:
// [ReasonRateLimited], [ReasonAwaitingAgreement] or [ReasonStoreUnavailable]
// (ReasonRateLimited on a closed limiter, whose Acquire returns [ErrClosed]).
// Like Acquire, it counts as a call for the ramp, and TryAcquire(0) grants
// nothing with NotThrottled.
func (l *Limiter) TryAcquire(n int) (Grant, Reason) {
	return l.tryAcquire(n, 0)
}

// Settle keeps used of g's tokens (at most g.Tokens) and gives the others
// back to the epoch that granted them, and returns the grant of the tokens
// kept, which can be settled again with fewer used to give more back (a
// caller that learns later that it keeps fewer). If g's epoch has ended the
// tokens given back are dropped: tokens never carry over to another epoch.
// Settle takes no lock while no caller waits.
func (l *Limiter) Settle(g Grant, used int) Grant {
	used = min(max(used, 0), max(g.Tokens, 0))
	l.Deposit(g, g.Tokens-used)
	g.Tokens, g.from.settled = used, true
	return g
}

// Deposit is [Limiter.Settle]'s short form, for a caller that does not settle
// again: Deposit(g, unused) gives back what Settle(g, g.Tokens-unused) does,
// at most g.Tokens, and drops the grant of the tokens kept. A grant should be
// deposited at most once.
func (l *Limiter) Deposit(g Grant, unused int) {
	if unused > 0 && g.Tokens > 0 { // inlined: a reader that used its grant makes no call
		l.deposit(g, unused)
	}
}

// deposit gives back unused (> 0) of g's tokens to g's epoch, if it is current.
func (l *Limiter) deposit(g Grant, unused int) {
	if st := l.state.Load(); st.epoch == g.epoch && int(g.from.lane) < len(st.counters) {
		if st.paused.Load() { // tokens given back during a pause wait for its end
			st.withheld.Add(int64(min(unused, g.Tokens)))
			return
		}
		st.counter(g.from.lane).Add(int64(min(unused, g.Tokens)))
		if l.wait.n.Load() > 0 {
			l.serveNow()
		}
	}
}

// acquire is the hot path of every Acquire: one atomic add on the lane's counter.
func (l *Limiter) acquire(ctx context.Context, n int, lane uint32) (Grant, error) {
	st := l.state.Load()
	if uint64(n-1) < maxRequest {
		if v := st.counter(lane).Add(-int64(n)); v >= 0 && st.called.Load() {
			return Grant{Tokens: n, epoch: st.epoch, from: grantFrom{lane: lane}}, nil
		} else if g := l.settle(st, lane, int64(n), v); g.Tokens > 0 {
			return g, nil
		}
		return l.acquireSlow(ctx, int64(n))
	}
	return l.acquireSlow(ctx, min(max(int64(n), 0), maxRequest))
}

// tryAcquire is acquire that never waits.
func (l *Limiter) tryAcquire(n int, lane uint32) (Grant, Reason) {
	st := l.state.Load()
	if uint64(n-1) < maxRequest {
		if v := st.counter(lane).Add(-int64(n)); v >= 0 && st.called.Load() {
			return Grant{Tokens: n, epoch: st.epoch, from: grantFrom{lane: lane}}, NotThrottled
		} else if g := l.settle(st, lane, int64(n), v); g.Tokens > 0 {
			return g, NotThrottled
		}
		return l.trySlow(int64(n))
	}
	return l.trySlow(min(max(int64(n), 0), maxRequest))
}

// settle finishes a take of k that left the lane's counter at v: it keeps what the
// counter had, finds the rest elsewhere and marks the epoch called. It grants
// nothing when no token was found.
func (l *Limiter) settle(st *epochState, lane uint32, k, v int64) Grant {
	c := st.counter(lane)
	g := min(k, max(v+k, 0))
	if g < k {
		c.Add(k - g)
		g += st.replenish(lane, k-g)
	}
	if g == 0 {
		return Grant{}
	}
	if !st.called.Load() {
		st.called.Store(true)
	}
	return Grant{Tokens: int(g), epoch: st.epoch, from: grantFrom{lane: lane}}
}

// takeLocked is the start of every slow path: it marks the epoch called and takes
// up to k tokens unless callers are queued ahead. l.mu is held.
func (l *Limiter) takeLocked(k int64) (*epochState, Grant, error) {
	if l.closed {
		return nil, Grant{}, ErrClosed
	}
	st := l.state.Load()
	if st.eligible && !st.called.Load() {
		st.called.Store(true)
	}
	if k == 0 {
		return st, Grant{epoch: st.epoch}, nil
	}
	if l.wait.len() == 0 {
		if g := st.gather(k, noLane); g > 0 {
			return st, Grant{Tokens: int(g), epoch: st.epoch}, nil
		}
	}
	if l.cfg.Lend && st.eligible && !st.dry.Load() {
		st.dry.Store(true)
	}
	return st, Grant{}, nil
}

// trySlow takes tokens under the mutex, or says why there are none.
func (l *Limiter) trySlow(k int64) (Grant, Reason) {
	l.mu.Lock()
	began := l.catchUp(l.clk.Now())
	st, g, err := l.takeLocked(k)
	reason := NotThrottled
	switch {
	case err != nil:
		reason = ReasonRateLimited
	case g.Tokens == 0 && k > 0:
		reason = st.reason(l.link.fail != nil)
	}
	l.mu.Unlock()
	if began {
		l.notifyEnded()
	}
	return g, reason
}

// acquireSlow takes tokens under the mutex, or queues the caller until a tick
// brings tokens, or fails fast when the deadline is before that tick.
func (l *Limiter) acquireSlow(ctx context.Context, k int64) (Grant, error) {
	l.mu.Lock()
	now := l.clk.Now()
	began := l.catchUp(now)
	unlock := func() {
		l.mu.Unlock()
		if began {
			l.notifyEnded()
		}
	}
	st, g, err := l.takeLocked(k)
	if err != nil || g.Tokens > 0 || k == 0 {
		unlock()
		return g, err
	}
	wait := l.untilTick(now)
	reason := st.reason(l.link.fail != nil)
	if dl, ok := ctx.Deadline(); ok && dl.Before(now.Add(wait)) {
		unlock()
		return Grant{}, &ThrottledError{Reason: reason, Wait: wait}
	}
	w := l.wait.push(k)
	// A deposit that raced with the gather above saw no waiter and served nobody;
	// look again now that the queue is visible to depositors.
	l.wait.serve(st)
	unlock()

	select {
	case r := <-w.ch:
		return r.grant, r.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	removed := l.wait.remove(w)
	now = l.clk.Now()
	wait = l.untilTick(now)
	l.mu.Unlock()
	if !removed { // served while we were giving up: keep the tokens
		r := <-w.ch
		return r.grant, r.err
	}
	return Grant{}, &ThrottledError{Reason: reason, Wait: wait, Cause: ctx.Err()}
}

// serveNow hands deposited tokens to waiting callers.
func (l *Limiter) serveNow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.wait.serve(l.state.Load())
	}
}

// reason says why a caller of st would wait: storeFailing is whether the
// last sync with the store failed.
func (st *epochState) reason(storeFailing bool) Reason {
	switch {
	case st.held:
		return ReasonDownstreamThrottled
	case st.eligible:
		return ReasonRateLimited
	case st.leaseOut || storeFailing:
		return ReasonStoreUnavailable
	default:
		return ReasonAwaitingAgreement
	}
}

// Close stops the limiter: waiting callers get [ErrClosed], later calls too, and a
// replica of a store leaves the replicas so that the others get its share back. Close
// is safe to call more than once; later calls return nil.
func (l *Limiter) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.timers.stop(l.timers.tick)
	l.timers.stop(l.link.timer)
	cur := l.state.Load()
	last := cur.pool
	if l.obs.fn != nil {
		l.obs.ended = append(l.obs.ended, cur.summary())
	}
	st := &epochState{epoch: -1, closed: true, counters: newCounters(l.lanes.n)}
	l.state.Store(st)
	l.wait.fail(ErrClosed)
	l.mu.Unlock()

	l.link.cancel()
	l.timers.wg.Wait()
	l.notifyEnded() // after the timer goroutine, which calls the observer too
	return l.link.leave(ctx, last, l.cfg.StaleAfter)
}

// Status is a snapshot of a limiter, for /status and for tests.
type Status struct {
	// Epoch is the current epoch, whole seconds of the store clock.
	Epoch int64
	// Mode is the ramp mode.
	Mode Mode
	// PoolMilli is the vertex's pool P for this epoch, in milli-tokens.
	PoolMilli int64
	// Share is this replica's share of the pool in this epoch.
	Share int64
	// Granted is the tokens granted in this epoch, less deposits.
	Granted int64
	// Replicas is the number of replicas the pool is split among.
	Replicas int
	// Rank is this replica's rank among them.
	Rank int
	// Called reports whether a call arrived in this epoch.
	Called bool
	// Waiting is the number of callers waiting for tokens.
	Waiting int
	// Throttled says why callers would wait now, or NotThrottled.
	Throttled Reason
	// StoreUp reports whether the last sync with the store succeeded (true
	// without a store).
	StoreUp bool
	// Cuts is the number of cuts of the pool by throttle signals this replica
	// applied, and PausedUntil the end of the pause they asked for, on the
	// store clock, while it lasts (zero otherwise).
	Cuts        int64
	PausedUntil time.Time
	// CeilingMilli is the learnt ceiling that caps the pool's climb in this
	// epoch, in milli-tokens: the pool at which the last cut's signal came;
	// 0 when there is none (none learnt, or forgotten).
	CeilingMilli int64
	// ShadowThrottled is the tokens granted through a [Gate] in shadow beyond what
	// the limiter granted, and kept, since it started: what it would have
	// throttled.
	ShadowThrottled int64
	// Max is the limit in force, and Shadow whether it is in shadow.
	Max    int64
	Shadow bool
	// Lent is the tokens this replica lent to its store's spare since it
	// started, and Borrowed those it took from it (Config.Lend).
	Lent, Borrowed int64
	// Syncs is the calls this replica made to its store since it started
	// (each one round trip to Redis), successful or not.
	Syncs int64
}

// Pool returns PoolMilli in tokens.
func (s Status) Pool() float64 { return float64(s.PoolMilli) / milli }

// Shares returns every replica's share of the pool in the epoch, by rank:
// Replicas shares that sum to the whole tokens of the pool; nil while the
// replica count is not known.
func (s Status) Shares() []int64 {
	if s.Replicas <= 0 {
		return nil
	}
	out := make([]int64, s.Replicas)
	for r := range out {
		out[r] = shareOf(s.PoolMilli, s.Replicas, r)
	}
	return out
}

// Status returns a snapshot of the limiter.
func (l *Limiter) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state.Load()
	s := Status{
		Epoch: st.epoch, Mode: l.cfg.Mode, PoolMilli: st.pool, Share: st.share,
		Granted: st.granted(), Replicas: st.size, Rank: st.rank,
		Called: st.called.Load(), Waiting: l.wait.len(), StoreUp: l.link.store == nil || (l.link.registered && l.link.fail == nil),
		Cuts: l.quota.signals.cuts.Load(), ShadowThrottled: l.shadow.Load(), Max: st.max, Shadow: st.shadowOn,
		Lent: l.lend.lent.Load(), Borrowed: l.lend.borrowed.Load(), Syncs: l.link.syncs,
	}
	if l.quota.signals.pauseUntil > l.clock.nanos(l.clk.Now()) {
		s.PausedUntil = time.Unix(0, l.quota.signals.pauseUntil)
	}
	if _, ok := l.quota.capAt(st.epoch); ok {
		s.CeilingMilli = l.quota.ceil.pool
	}
	if st.unspent() == 0 {
		s.Throttled = st.reason(l.link.fail != nil)
	}
	return s
}
