package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// Limiter hands out tokens from a pool of at most Max per one-second epoch, shared
// with the other replicas of its [Store] (or alone without one), ramping from Min as
// its [Mode] says. Callers take tokens with [Limiter.Acquire] before they read and
// give back what they did not use with [Limiter.Deposit]; the pair that also tags the
// epoch, [Limiter.AcquireGrant] and [Limiter.DepositGrant], is exact across epoch
// boundaries.
//
// Acquire and Deposit take no lock and read no clock: the current epoch's share is
// kept in atomics that a timer replaces at each epoch boundary. Callers that must
// wait are queued and served in arrival order when tokens come.
//
// A Limiter is safe for concurrent use. Create one with [New]; the zero value is not
// usable. Call [Limiter.Close] when done.
type Limiter struct {
	state atomic.Pointer[epochState] // the current epoch; replaced at each boundary
	nwait atomic.Int32               // len(waiters), readable without mu

	cfg   Config
	clk   clock.Clock
	store Store
	id    string
	sync  time.Duration
	hook  func()

	// The store clock: store time = base's wall time + time elapsed since base (by
	// the monotonic clock when available) + offset. Epochs are its whole seconds.
	base     time.Time
	baseNano int64

	syncCtx    context.Context
	syncCancel context.CancelFunc
	timers     sync.WaitGroup // running or pending timer callbacks

	mu       sync.Mutex
	offset   int64 // store clock minus local clock, ns
	ramp     ramp
	member   membership
	waiters  []*waiter
	closed   bool
	tick     clock.Timer // next epoch boundary or pacing slice
	syncT    clock.Timer // next sync
	syncFail error       // last sync error, nil after a success
}

// epochState is one epoch of one replica. Only taken, allow and called change after
// it is published.
type epochState struct {
	taken  atomic.Int64 // tokens granted minus tokens deposited
	allow  atomic.Int64 // tokens grantable so far: the share, or its paced part
	called atomic.Bool  // a call arrived in this epoch
	_      [40]byte     // keep the hot words on their own cache line

	epoch    int64
	pool     int64 // P, milli-tokens
	share    int64
	size     int
	rank     int
	eligible bool
	slice    int // pacing slice whose allowance is in allow
	closed   bool
}

// Grant is tokens granted in one epoch, returned by [Limiter.AcquireGrant].
type Grant struct {
	// Tokens is the number of tokens granted.
	Tokens int
	epoch  int64
}

type waiter struct {
	n  int64
	ch chan waitResult // buffered; receives exactly once
}

type waitResult struct {
	grant Grant
	err   error
}

// maxRequest caps a single request so that taken never overflows.
const maxRequest = MaxTokens

// New returns a Limiter for cfg, which must be valid (see [Config.Validate]).
// With [WithStore] the limiter registers with the store before it returns, and
// takes no tokens until the replicas agree on the pool (DESIGN §3).
func New(cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, clk: o.clock, store: o.store, id: o.id, sync: o.syncInterval, hook: o.waitHook}
	l.base = l.clk.Now()
	l.baseNano = l.base.UnixNano()
	l.member.solo = l.store == nil
	l.syncCtx, l.syncCancel = context.WithCancel(context.Background())

	if l.store != nil {
		// Register, then report the live count at once: a replica alone in its pool
		// agrees at the second sync.
		l.syncOnce()
		l.syncOnce()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	start := l.epochAt(now)
	l.ramp = newRamp(cfg, start)
	l.publish(l.newEpoch(start, now))
	l.scheduleTick(now)
	if l.store != nil {
		l.scheduleSync()
	}
	return l, nil
}

// Acquire takes up to n tokens and returns how many it took: min(n, tokens left in
// this replica's share of the current epoch). When none are left it waits for the
// next epoch, in arrival order with other waiting callers. When ctx's deadline comes
// before the next epoch it returns 0 at once with a [*ThrottledError], which matches
// [ErrRateLimited] and says how long to wait. Acquire(ctx, 0) returns 0 and counts as
// a call for the ramp.
//
// Tokens left over should be given back with Deposit in the same epoch; use
// AcquireGrant and DepositGrant when the epoch may end in between.
func (l *Limiter) Acquire(ctx context.Context, n int) (int, error) {
	g, err := l.AcquireGrant(ctx, n)
	return g.Tokens, err
}

// AcquireGrant is Acquire returning a [Grant] that remembers its epoch, for
// [Limiter.DepositGrant].
func (l *Limiter) AcquireGrant(ctx context.Context, n int) (Grant, error) {
	st := l.state.Load()
	k := int64(n)
	if k > 0 && k <= maxRequest {
		t := st.taken.Add(k)
		a := st.allow.Load()
		if t <= a {
			if !st.called.Load() {
				st.called.Store(true)
			}
			return Grant{Tokens: n, epoch: st.epoch}, nil
		}
		return l.overshoot(ctx, st, k, t, a)
	}
	return l.acquireSlow(ctx, min(max(k, 0), maxRequest))
}

// overshoot settles a fast-path add that went past the allowance: it keeps the part
// that fit, undoes the rest, and waits when nothing fit.
func (l *Limiter) overshoot(ctx context.Context, st *epochState, k, t, a int64) (Grant, error) {
	g := min(k, max(0, a-(t-k)))
	st.taken.Add(g - k)
	if g > 0 {
		if !st.called.Load() {
			st.called.Store(true)
		}
		return Grant{Tokens: int(g), epoch: st.epoch}, nil
	}
	return l.acquireSlow(ctx, k)
}

// Deposit gives back n tokens that were acquired in the current epoch and not used.
// It never credits an epoch with more tokens than it has granted. If the tokens may
// come from an epoch that has ended, use DepositGrant, which drops them.
func (l *Limiter) Deposit(n int) {
	if n <= 0 {
		return
	}
	st := l.state.Load()
	for {
		t := st.taken.Load()
		k := min(int64(n), t)
		if k <= 0 {
			return
		}
		if st.taken.CompareAndSwap(t, t-k) {
			break
		}
	}
	if l.nwait.Load() > 0 {
		l.serveNow()
	}
}

// DepositGrant gives back unused of g's tokens. If g's epoch has ended they are
// dropped: tokens never carry over to another epoch. Give back at most g.Tokens per
// grant in total.
func (l *Limiter) DepositGrant(g Grant, unused int) {
	if unused <= 0 {
		return
	}
	st := l.state.Load()
	if st.epoch != g.epoch || st.closed {
		return
	}
	st.taken.Add(-min(int64(unused), int64(g.Tokens)))
	if l.nwait.Load() > 0 {
		l.serveNow()
	}
}

// acquireSlow takes tokens under the mutex, or queues the caller until a tick
// brings tokens, or fails fast when the deadline is before that tick.
func (l *Limiter) acquireSlow(ctx context.Context, k int64) (Grant, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Grant{}, ErrClosed
	}
	st := l.state.Load()
	if st.eligible && !st.called.Load() {
		st.called.Store(true)
	}
	if k == 0 {
		l.mu.Unlock()
		return Grant{epoch: st.epoch}, nil
	}
	if len(l.waiters) == 0 {
		if g := takeExact(st, k); g > 0 {
			l.mu.Unlock()
			return Grant{Tokens: int(g), epoch: st.epoch}, nil
		}
	}
	now := l.clk.Now()
	wait := l.nextTick(st, now).Sub(now)
	reason := l.reasonOf(st)
	if dl, ok := ctx.Deadline(); ok && dl.Before(now.Add(wait)) {
		l.mu.Unlock()
		return Grant{}, &ThrottledError{Reason: reason, Wait: wait}
	}
	w := &waiter{n: k, ch: make(chan waitResult, 1)}
	l.waiters = append(l.waiters, w)
	l.nwait.Store(int32(len(l.waiters)))
	if l.hook != nil {
		l.hook()
	}
	l.mu.Unlock()

	select {
	case r := <-w.ch:
		return r.grant, r.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	removed := l.removeWaiter(w)
	now = l.clk.Now()
	wait = l.nextTick(l.state.Load(), now).Sub(now)
	l.mu.Unlock()
	if !removed { // served while we were giving up: keep the tokens
		r := <-w.ch
		return r.grant, r.err
	}
	return Grant{}, &ThrottledError{Reason: reason, Wait: wait, Cause: ctx.Err()}
}

// takeExact takes min(k, tokens left) from st without overshooting.
func takeExact(st *epochState, k int64) int64 {
	for {
		t := st.taken.Load()
		left := st.allow.Load() - t
		if left <= 0 {
			return 0
		}
		g := min(k, left)
		if st.taken.CompareAndSwap(t, t+g) {
			return g
		}
	}
}

// serveNow hands deposited tokens to waiting callers.
func (l *Limiter) serveNow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.serve(l.state.Load())
	}
}

// serve grants st's tokens to waiting callers in arrival order. l.mu is held.
func (l *Limiter) serve(st *epochState) {
	served := 0
	for _, w := range l.waiters {
		g := takeExact(st, w.n)
		if g == 0 {
			break
		}
		w.ch <- waitResult{grant: Grant{Tokens: int(g), epoch: st.epoch}}
		served++
	}
	if served > 0 {
		clear(l.waiters[:served])
		l.waiters = l.waiters[served:]
		l.nwait.Store(int32(len(l.waiters)))
	}
}

func (l *Limiter) removeWaiter(w *waiter) bool {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.nwait.Store(int32(len(l.waiters)))
			return true
		}
	}
	return false
}

func (l *Limiter) reasonOf(st *epochState) Reason {
	switch {
	case st.eligible:
		return ReasonRateLimited
	case l.syncFail != nil && l.member.agreed:
		return ReasonStoreUnavailable
	default:
		return ReasonAwaitingAgreement
	}
}

// Close stops the limiter: waiting callers get [ErrClosed], later calls too, and a
// replica of a store leaves its pool so that the others get its share back. Close
// is safe to call more than once; later calls return nil.
func (l *Limiter) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.stopTimer(l.tick)
	l.stopTimer(l.syncT)
	st := &epochState{epoch: -1, closed: true}
	l.state.Store(st)
	for _, w := range l.waiters {
		w.ch <- waitResult{err: ErrClosed}
	}
	l.waiters = nil
	l.nwait.Store(0)
	l.mu.Unlock()

	l.syncCancel()
	l.timers.Wait()
	if l.store != nil {
		return l.store.Leave(ctx, l.id)
	}
	return nil
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
	// PoolSize is the number of replicas the pool is split among.
	PoolSize int
	// Rank is this replica's rank in the pool.
	Rank int
	// Called reports whether a call arrived in this epoch.
	Called bool
	// Waiting is the number of callers waiting for tokens.
	Waiting int
	// Throttled says why callers would wait now, or NotThrottled.
	Throttled Reason
}

// Pool returns PoolMilli in tokens.
func (s Status) Pool() float64 { return float64(s.PoolMilli) / milli }

// Status returns a snapshot of the limiter.
func (l *Limiter) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state.Load()
	s := Status{
		Epoch: st.epoch, Mode: l.cfg.Mode, PoolMilli: st.pool, Share: st.share,
		Granted: min(st.taken.Load(), st.allow.Load()), PoolSize: st.size, Rank: st.rank,
		Called: st.called.Load(), Waiting: len(l.waiters),
	}
	if st.taken.Load() >= st.allow.Load() {
		s.Throttled = l.reasonOf(st)
	}
	return s
}
