package ratelimit

import (
	"cmp"
	"container/list"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/clock"
)

// KeyLimiter grants tokens per key: at most Max per key per one-second epoch,
// over every replica of its [share.KeyStore], or in this process without one. A
// caller asks for the tokens of many keys at once with [KeyLimiter.TryAcquire],
// which makes at most one call to the store whatever the number of keys, and
// none for keys it knows have no tokens left in the epoch.
//
// Epochs are whole seconds of the store's clock (Redis TIME), learnt at each
// call to the store, or of the limiter's clock without one. Counts of past
// epochs are never needed again, so a key's state is small; the limiter keeps
// that of at most MaxKeys keys, forgetting the least recently used first.
// Forgetting a key costs nothing with a store, which holds the counts; in
// this process it forgets the key's count, so a key forgotten and seen again
// in the same epoch may get up to Max more in that epoch (only when more than
// MaxKeys keys are seen in one second).
//
// A KeyLimiter is safe for concurrent use. Create one with [NewKeyLimiter];
// the zero value is not usable. Call [KeyLimiter.Close] when done.
type KeyLimiter struct {
	cfg     KeyConfig
	clk     clock.Clock
	store   share.KeyStore
	share   func() (size, rank int)
	log     *zap.Logger
	observe func(KeyEpochSummary)
	top     int
	timers  sync.WaitGroup

	clock *storeClock // the store's clock, whose whole seconds are the epochs

	mu        sync.Mutex
	closed    bool
	keys      map[string]*list.Element // of lru
	lru       list.List                // of *keyEntry, least recently used at the back
	evictions int64
	granted   int64
	fails     int // consecutive failed store calls
	retryAt   time.Time
	figures   map[int64]map[string]int64
	flushT    clock.Timer
	ended     []KeyEpochSummary
}

// keyEntry is what the limiter knows of one key.
type keyEntry struct {
	key   string
	epoch int64 // of used
	used  int64 // tokens counted in this process in epoch
	out   int64 // the last epoch in which the store had no tokens left for the key
}

const (
	// keyFlushDelay is how long after an epoch ends its summary waits for late grants.
	keyFlushDelay = 500 * time.Millisecond
	// keyStoreTimeout bounds one call to the store.
	keyStoreTimeout = time.Second
	// maxKeyBackoff is the longest the limiter leaves the store alone after failed calls.
	maxKeyBackoff = time.Second
	defaultTop    = 32
	noEpoch       = -1 << 62
)

// NewKeyLimiter returns a KeyLimiter for cfg, which must be valid. It does no
// I/O.
func NewKeyLimiter(cfg KeyConfig, opts ...Option) (*KeyLimiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.keyTop <= 0 {
		o.keyTop = defaultTop
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	return &KeyLimiter{cfg: cfg, clk: o.clock, clock: newStoreClock(o.clock.Now()), store: o.keyStore, share: o.keyShare,
		log: o.log, observe: o.keyObserve, top: o.keyTop,
		keys: make(map[string]*list.Element), figures: make(map[int64]map[string]int64)}, nil
}

// Max returns the most tokens a key may take in one epoch.
func (k *KeyLimiter) Max() int64 { return k.cfg.Max }

// TryAcquire grants, for each of reqs, up to Want tokens of its key in the current
// epoch, writing them to granted (which must be as long as reqs), and returns
// the epoch of the grants. The keys of reqs must be distinct. TryAcquire makes at
// most one call to the store; when the store fails it follows
// OnStoreFailure and retries the store at a later call (backing off up to a
// second), so it fails only on a closed limiter, with [ErrClosed].
func (k *KeyLimiter) TryAcquire(ctx context.Context, reqs []KeyRequest, granted []int) (int64, error) {
	granted = granted[:len(reqs)]
	clear(granted)
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return 0, ErrClosed
	}
	now := k.clk.Now()
	e := k.epochAt(now)
	useStore := k.store != nil && !now.Before(k.retryAt)
	localCap := int64(-1)
	var ask []int
	for i, r := range reqs {
		if r.Want <= 0 {
			continue
		}
		ent := k.entry(r.Key)
		switch {
		case k.store != nil && ent.out >= e:
			// the store said so earlier in this epoch
		case useStore:
			ask = append(ask, i)
		case k.store != nil && k.cfg.OnStoreFailure == Pause:
		default:
			if localCap < 0 {
				localCap = k.localCap()
			}
			granted[i] = int(k.count(ent, e, int64(r.Want), localCap))
		}
	}
	k.record(e, reqs, granted, nil)
	k.mu.Unlock()
	if len(ask) == 0 {
		return e, nil
	}
	return k.takeFromStore(ctx, e, reqs, granted, ask)
}

// takeFromStore asks the store for the requests ask indexes, in one call.
func (k *KeyLimiter) takeFromStore(ctx context.Context, e int64, reqs []KeyRequest, granted []int, ask []int) (int64, error) {
	sub, subGranted := reqs, granted
	if len(ask) < len(reqs) {
		sub, subGranted = make([]KeyRequest, len(ask)), make([]int, len(ask))
		for j, i := range ask {
			sub[j] = reqs[i]
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyStoreTimeout)
	t0 := k.clk.Now()
	at, err := k.store.TakeKeys(ctx, k.cfg.Max, sub, subGranted)
	t1 := k.clk.Now()
	cancel()

	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		clear(subGranted)
		k.storeFailed(err, t1)
		if k.cfg.OnStoreFailure == LastKnown && !k.closed {
			localCap := k.localCap()
			for _, i := range ask {
				granted[i] = int(k.count(k.entry(reqs[i].Key), e, int64(reqs[i].Want), localCap))
			}
			k.record(e, reqs, granted, ask)
		}
		return e, nil
	}
	if k.fails > 0 {
		k.log.Info("per-key store is reachable again", zap.Int("failedCalls", k.fails))
	}
	k.fails, k.retryAt = 0, time.Time{}
	k.clock.sample(t0, t1, at)
	se := floorDiv(at.UnixNano(), epochNanos)
	for j, i := range ask {
		g := min(max(subGranted[j], 0), reqs[i].Want)
		granted[i] = g
		if g < reqs[i].Want {
			if el := k.keys[reqs[i].Key]; el != nil {
				el.Value.(*keyEntry).out = se
			}
		}
	}
	if !k.closed {
		k.record(se, reqs, granted, ask)
	}
	return se, nil
}

// storeFailed notes a failed call to the store. k.mu is held.
func (k *KeyLimiter) storeFailed(err error, now time.Time) {
	if k.fails == 0 {
		k.log.Warn("per-key store unreachable", zap.Error(err), zap.Stringer("onStoreFailure", k.cfg.OnStoreFailure))
	}
	k.fails++
	k.retryAt = now.Add(min(100*time.Millisecond<<min(k.fails-1, 10), maxKeyBackoff))
}

// localCap is this replica's share of Max for counting in this process. k.mu is held.
func (k *KeyLimiter) localCap() int64 {
	if k.share == nil {
		return k.cfg.Max
	}
	size, rank := k.share()
	return shareOf(k.cfg.Max*milli, size, rank)
}

// count takes up to want of the key's local count in epoch e, capped at c. k.mu is held.
func (k *KeyLimiter) count(ent *keyEntry, e, want, c int64) int64 {
	if ent.epoch != e {
		ent.epoch, ent.used = e, 0
	}
	g := max(min(want, c-ent.used), 0)
	ent.used += g
	return g
}

// entry returns the key's entry, made the most recently used, creating it
// and forgetting the least recently used beyond MaxKeys. k.mu is held.
func (k *KeyLimiter) entry(key string) *keyEntry {
	if el := k.keys[key]; el != nil {
		k.lru.MoveToFront(el)
		return el.Value.(*keyEntry)
	}
	ent := &keyEntry{key: key, epoch: noEpoch, out: noEpoch}
	k.keys[key] = k.lru.PushFront(ent)
	for len(k.keys) > k.cfg.MaxKeys {
		old := k.lru.Remove(k.lru.Back()).(*keyEntry)
		delete(k.keys, old.key)
		k.evictions++
	}
	return ent
}

// record adds the grants of reqs (those ask indexes, or all) to the figures
// of epoch e, and arms the timer that hands them to the observer. k.mu is held.
func (k *KeyLimiter) record(e int64, reqs []KeyRequest, granted []int, ask []int) {
	add := func(i int) {
		if g := granted[i]; g > 0 {
			k.granted += int64(g)
			if k.observe == nil {
				return
			}
			f := k.figures[e]
			if f == nil {
				f = make(map[string]int64)
				k.figures[e] = f
			}
			f[reqs[i].Key] += int64(g)
		}
	}
	if ask == nil {
		for i := range reqs {
			add(i)
		}
	} else {
		for _, i := range ask {
			add(i)
		}
	}
	if k.observe != nil && len(k.figures) > 0 && k.flushT == nil {
		k.armFlush()
	}
}

// armFlush arms the timer for the summary of the oldest epoch with figures. k.mu is held.
func (k *KeyLimiter) armFlush() {
	oldest := int64(1<<62 - 1)
	for e := range k.figures {
		oldest = min(oldest, e)
	}
	now := k.clk.Now()
	d := k.localAt((oldest + 1) * epochNanos).Add(keyFlushDelay).Sub(now)
	k.timers.Add(1)
	k.flushT = k.clk.AfterFunc(max(d, time.Millisecond), func() {
		defer k.timers.Done()
		k.flush(false)
		k.notify()
	})
}

// flush ends the summaries of the epochs that ended keyFlushDelay ago, or
// all of them. It takes k.mu.
func (k *KeyLimiter) flush(all bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.flushT = nil
	if k.closed && !all {
		return
	}
	cut := k.epochAt(k.clk.Now().Add(-keyFlushDelay))
	for _, e := range slices.Sorted(maps.Keys(k.figures)) {
		if !all && e >= cut {
			break
		}
		k.ended = append(k.ended, summarize(e, k.figures[e], k.top))
		delete(k.figures, e)
	}
	if !all && len(k.figures) > 0 {
		k.armFlush()
	}
}

// summarize makes the summary of epoch e from its grants per key.
func summarize(e int64, f map[string]int64, top int) KeyEpochSummary {
	s := KeyEpochSummary{Epoch: e, Keys: len(f)}
	all := make([]KeyCount, 0, len(f))
	for key, n := range f {
		s.Granted += n
		all = append(all, KeyCount{Key: key, Tokens: n})
	}
	slices.SortFunc(all, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Tokens, a.Tokens); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	s.Top = all[:min(len(all), top)]
	return s
}

// notify hands the ended summaries to the observer, outside k.mu.
func (k *KeyLimiter) notify() {
	k.mu.Lock()
	ended := k.ended
	k.ended = nil
	k.mu.Unlock()
	for _, s := range ended {
		k.observe(s)
	}
}

// epochAt returns the epoch of a local clock reading.
func (k *KeyLimiter) epochAt(now time.Time) int64 { return k.clock.epochAt(now) }

// localAt returns the local clock reading at which the store clock reads ns.
func (k *KeyLimiter) localAt(ns int64) time.Time { return k.clock.localAt(ns) }

// Epoch returns the current epoch, by the limiter's estimate of the store
// clock (as of its last call to the store), and the time left in it, as
// [Limiter.Epoch] does.
func (k *KeyLimiter) Epoch() (int64, time.Duration) {
	ns := k.clock.nanos(k.clk.Now())
	e := floorDiv(ns, epochNanos)
	return e, time.Duration((e+1)*epochNanos - ns)
}

// WaitEpoch waits until epoch e has begun by the limiter's estimate of the
// store clock, or until ctx is done, and returns ctx's error then.
func (k *KeyLimiter) WaitEpoch(ctx context.Context, e int64) error {
	k.mu.Lock()
	at := k.localAt(e * epochNanos)
	k.mu.Unlock()
	if !at.After(k.clk.Now()) {
		return nil
	}
	if !clock.SleepUntil(ctx, k.clk, at) {
		return ctx.Err()
	}
	return nil
}

// Status returns a snapshot of the limiter.
func (k *KeyLimiter) Status() KeyStatus {
	k.mu.Lock()
	defer k.mu.Unlock()
	return KeyStatus{Epoch: k.epochAt(k.clk.Now()), Keys: len(k.keys), Evictions: k.evictions, Granted: k.granted,
		StoreUp: k.store == nil || k.fails == 0}
}

// Close hands the summaries of the epochs not yet summarized to the observer.
// Later calls to TryAcquire return [ErrClosed]. Close is safe to call more than once.
func (k *KeyLimiter) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	if k.flushT != nil && k.flushT.Stop() {
		k.timers.Done()
	}
	k.mu.Unlock()
	k.timers.Wait()
	if k.observe != nil {
		k.flush(true)
		k.notify()
	}
	return nil
}
