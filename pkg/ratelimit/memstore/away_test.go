package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// freezable is one replica's view of the test's manual clock: while frozen,
// as a process stopped by SIGSTOP or a stop-the-world pause is, its timers
// do not run; they run late, in order, when it thaws. Its Now never stops:
// the monotonic clock of a frozen process goes on.
type freezable struct {
	c *clock.Manual

	mu     sync.Mutex
	frozen bool
	late   []func()
}

func (f *freezable) Now() time.Time { return f.c.Now() }

func (f *freezable) AfterFunc(d time.Duration, fn func()) clock.Timer {
	return f.c.AfterFunc(d, func() {
		f.mu.Lock()
		if f.frozen {
			f.late = append(f.late, fn)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		fn()
	})
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

// thaw runs the timers that came due while frozen, in the order they came
// due, as a woken process's runtime does.
func (f *freezable) thaw() {
	f.mu.Lock()
	late := f.late
	f.late, f.frozen = nil, false
	f.mu.Unlock()
	for _, fn := range late {
		fn()
	}
}

// A replica frozen past its lease comes back to others that shared its share
// without it. Whatever runs first when it wakes (a caller, its epoch timer or
// its sync), it spends nothing of the share it had, and it takes part again
// only once the others count it.
func TestFrozenReplicaNeverSpendsAShareTheOthersTook(t *testing.T) {
	for _, policy := range []ratelimit.StoreFailurePolicy{ratelimit.Pause, ratelimit.LastKnown} {
		for _, frozenFor := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 5 * time.Second, 15 * time.Second} {
			for _, first := range []string{"caller", "timers"} {
				t.Run(fmt.Sprint(policy, "/", frozenFor, "/", first), func(t *testing.T) {
					testFrozenReplica(t, policy, frozenFor, first)
				})
			}
		}
	}
}

func testFrozenReplica(t *testing.T, policy ratelimit.StoreFailurePolicy, frozenFor time.Duration, first string) {
	cfg := flat(300)
	cfg.OnStoreFailure = policy
	p := newReplicas(t, cfg)
	fa := &freezable{c: p.clk}
	t.Cleanup(fa.thaw) // before the pool's, which closes the limiters
	a := p.joinWith("a", cfg, ratelimit.WithClock(fa))
	p.joinWith("b", cfg)
	p.joinWith("c", cfg)
	p.run(3 * time.Second)
	if got := p.nextEpoch(); got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
		t.Fatalf("before the freeze: %v; want 100 each", got)
	}

	// Frozen in the middle of an epoch with tokens left: its caller took 40
	// of its 100 and the others all of theirs.
	r := p.reps["a"]
	r.dead = true // takes nothing while frozen
	p.nextEpoch()
	g, err := a.TryAcquire(40)
	if err != ratelimit.NotThrottled || g.Tokens != 40 {
		t.Fatalf("a's TryAcquire(40) before the freeze = %d tokens, %v", g.Tokens, err)
	}
	p.kept[g.Epoch()] += 40
	fa.freeze()
	p.run(frozenFor)
	if frozenFor >= 3*time.Second {
		// The others shared the pool without a once its lease had run out.
		if got := p.nextEpoch(); got["b"] != 150 || got["c"] != 150 {
			t.Fatalf("while a is frozen: %v; want 150 each", got)
		}
	}

	// a wakes. Before its timers run, a caller may find the 60 tokens left
	// of the epoch it froze in: their epoch has ended, and Epoch says so.
	r.dead = false
	if first == "caller" {
		g, _ := a.TryAcquire(1000)
		if now, _ := a.Epoch(); g.Epoch() < now {
			a.Deposit(g, g.Tokens) // not to be spent: dropped
		} else {
			p.kept[g.Epoch()] += int64(g.Tokens)
		}
	}
	fa.thaw()
	for range 40 {
		p.clk.Advance(ratelimit.DefaultSyncInterval)
		p.drain()
	}
	for e, n := range p.kept {
		if n > 300 {
			t.Fatalf("epoch %d granted %d; pool 300", e, n)
		}
	}
	if got := p.nextEpoch(); got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
		t.Fatalf("after a rejoined: %v; want 100 each", got)
	}
}

// The epoch a replica's timer has not yet begun (the process was frozen past
// its end) begins at the first call that needs the clock: Epoch, or an
// Acquire that found no tokens.
func TestLateTimerCatchesUp(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	fc := &freezable{c: clk}
	var ended []int64
	l, err := ratelimit.New(flat(10), ratelimit.WithClock(fc), ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
		ended = append(ended, s.Epoch)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	t.Cleanup(fc.thaw) // before Close, which waits for the timers
	g, _ := l.TryAcquire(4)
	start := g.Epoch()
	fc.freeze()
	clk.Advance(2500 * time.Millisecond)
	// The fast path still sees the old epoch's 6 tokens; Epoch tells.
	if e, left := l.Epoch(); e != start+2 || left != 500*time.Millisecond {
		t.Fatalf("Epoch() = %d, %v; want %d, 500ms", e, left, start+2)
	}
	g, _ = l.TryAcquire(100)
	if g.Epoch() != start+2 || g.Tokens != 10 {
		t.Fatalf("after Epoch: %d tokens of epoch %d; want 10 of %d", g.Tokens, g.Epoch(), start+2)
	}
	if len(ended) != 1 || ended[0] != start {
		t.Fatalf("epochs ended %v; want [%d]", ended, start)
	}
	fc.thaw()
	clk.Advance(600 * time.Millisecond)
	if s := l.Status(); s.Epoch != start+3 {
		t.Fatalf("after thawing: epoch %d; want %d", s.Epoch, start+3)
	}

	// An Acquire that finds the epoch used up catches up too.
	if g, _ := l.TryAcquire(10); g.Tokens != 10 {
		t.Fatalf("TryAcquire(10) = %d tokens", g.Tokens)
	}
	fc.freeze()
	clk.Advance(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if g, err := l.Acquire(ctx, 20); err != nil || g.Tokens != 10 || g.Epoch() != start+4 {
		t.Fatalf("Acquire after a late timer = %d tokens of %d, %v; want 10 of %d", g.Tokens, g.Epoch(), err, start+4)
	}
	fc.thaw()
	if _, err := l.Acquire(ctx, 1); !errors.Is(err, ratelimit.ErrRateLimited) {
		t.Fatalf("Acquire = %v; want rate limited", err)
	}
}

// stepped is the test's manual clock read with an offset that the test can
// step, as a host's clock that jumps: timers still run after real durations.
type stepped struct {
	c   *clock.Manual
	off atomic.Int64
}

func (s *stepped) Now() time.Time { return s.c.Now().Add(time.Duration(s.off.Load())) }

func (s *stepped) AfterFunc(d time.Duration, fn func()) clock.Timer { return s.c.AfterFunc(d, fn) }

// A replica whose clock jumps 5s either way, or back by less than its lease,
// counts its epochs by the store's clock again at its next sync, and in
// between spends no token of another second's share. (A forward jump shorter
// than the lease looks from inside like a freeze that ended, which begins the
// epoch the clock reads; the epoch it began early is its own share, granted
// in the wrong second until the next sync puts it right.)
func TestSteppedClockKeepsTheLimit(t *testing.T) {
	for _, policy := range []ratelimit.StoreFailurePolicy{ratelimit.Pause, ratelimit.LastKnown} {
		for _, step := range []time.Duration{5 * time.Second, -5 * time.Second, -700 * time.Millisecond} {
			t.Run(fmt.Sprint(policy, "/", step), func(t *testing.T) {
				cfg := flat(300)
				cfg.OnStoreFailure = policy
				p := newReplicas(t, cfg)
				sc := &stepped{c: p.clk}
				p.joinWith("a", cfg, ratelimit.WithClock(sc))
				p.joinWith("b", cfg)
				p.joinWith("c", cfg)
				// spent[e] is what the replicas spent in true epoch e: tokens of
				// a grant whose epoch has ended by its limiter's clock are not
				// spent, as a forwarder does.
				spent := map[int64]int64{}
				tick := func() {
					e := p.clk.Now().Unix()
					for id, r := range p.reps {
						g, _ := r.l.TryAcquire(1000)
						if g.Tokens == 0 {
							continue
						}
						if now, _ := r.l.Epoch(); g.Epoch() < now {
							r.l.Deposit(g, g.Tokens)
							continue
						}
						if g.Epoch() != e && id != "a" {
							t.Fatalf("%s was granted tokens of epoch %d in epoch %d", id, g.Epoch(), e)
						}
						spent[e] += int64(g.Tokens)
					}
					p.clk.Advance(37 * time.Millisecond)
				}
				for range 100 {
					tick()
				}
				sc.off.Store(int64(step))
				for range 200 {
					tick()
				}
				for e, n := range spent {
					if n > 300 {
						t.Errorf("epoch %d: %d spent; pool 300 (all: %v)", e, n, spent)
					}
				}
				// Every replica is back to its share.
				last := p.clk.Now().Unix() - 1
				if spent[last] != 300 {
					t.Errorf("epoch %d: %d spent; want the whole pool, 300 (all: %v)", last, spent[last], spent)
				}
			})
		}
	}
}

// A replica cut off from the store cannot learn of a cut the others make:
// with pause, it grants in no epoch a cut decided after its last sync could
// apply to, so that the cut epoch grants no more than the cut pool; with
// lastKnown it keeps its share, availability first, and the epochs grant up
// to max plus its share.
func TestCutOffReplicaMissesACut(t *testing.T) {
	for _, tt := range []struct {
		policy ratelimit.StoreFailurePolicy
		most   int64 // the most an epoch may grant
		cutOK  bool  // whether the cut epoch keeps within the cut pool
	}{
		{ratelimit.Pause, 300, true},
		{ratelimit.LastKnown, 400, false},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			cfg := flat(300)
			cfg.Adaptive, cfg.CutPercentage, cfg.OnStoreFailure = true, 50, tt.policy
			cfg.Min = 30
			p := newReplicas(t, cfg)
			for _, id := range []string{"a", "b", "c"} {
				p.join(id)
			}
			cut := int64(0) // the epoch whose pool the cut set
			tick := func() {
				p.drain()
				for _, r := range p.reps {
					if s := r.l.Status(); s.PoolMilli == 150_000 && cut == 0 {
						cut = s.Epoch
					}
				}
				p.clk.Advance(ratelimit.DefaultSyncInterval)
			}
			for range 33 {
				tick()
			}
			p.reps["a"].link.cut.Store(true)
			p.reps["b"].l.Signal(0) // a cut, decided while a cannot hear of it
			for range 40 {
				tick()
			}
			p.reps["a"].link.cut.Store(false)
			for range 30 {
				tick()
			}
			if cut == 0 {
				t.Fatal("no replica saw the cut pool of 150")
			}
			for e, n := range p.kept {
				if n > tt.most {
					t.Errorf("epoch %d granted %d; want at most %d (all: %v)", e, n, tt.most, p.kept)
				}
			}
			if ok := p.kept[cut] <= 150; ok != tt.cutOK {
				t.Errorf("the cut epoch %d granted %d of a pool of 150; want within it: %v", cut, p.kept[cut], tt.cutOK)
			}
		})
	}
}

// A store that lost its writes (a restart empty, a failover to a replica that
// had not got them) forgets replicas that still take their shares: it holds
// the replica count, so the replica that finds itself alone in the store keeps
// its share until the leases it may have forgotten have run out, and takes the
// whole pool only after them when the others are gone for good.
func TestStoreThatLostWritesHoldsTheReplicaCount(t *testing.T) {
	for _, back := range []bool{true, false} {
		t.Run(fmt.Sprint("othersBack=", back), func(t *testing.T) {
			p := newReplicas(t, flat(300))
			for _, id := range []string{"a", "b", "c"} {
				p.join(id)
			}
			p.run(2 * time.Second)
			if got := p.nextEpoch(); got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
				t.Fatalf("before the loss: %v", got)
			}
			// b and c cannot reach the store for a while, and go on granting
			// their shares within their leases; the store loses everything.
			p.reps["b"].link.cut.Store(true)
			p.reps["c"].link.cut.Store(true)
			p.run(300 * time.Millisecond)
			p.store.Flush()
			p.run(1200 * time.Millisecond) // a alone in the store; b's and c's leases last
			if got := p.nextEpoch(); got["a"] != 100 {
				t.Fatalf("a took %d while b's and c's leases lasted; want its share of 100 (%v)", got["a"], got)
			}
			if s := p.reps["a"].l.Status(); s.Replicas != 3 {
				t.Fatalf("a: replica count %d in the hold; want the 3 agreed last", s.Replicas)
			}
			if back {
				p.reps["b"].link.cut.Store(false)
				p.reps["c"].link.cut.Store(false)
				p.run(3 * time.Second)
				if got := p.nextEpoch(); got["a"] != 100 || got["b"] != 100 || got["c"] != 100 {
					t.Fatalf("after the others came back: %v; want 100 each", got)
				}
				return
			}
			p.crash("b")
			p.crash("c")
			p.run(3 * time.Second)
			if got := p.nextEpoch(); got["a"] != 300 {
				t.Fatalf("a took %d once b's and c's leases ran out; want the whole 300", got["a"])
			}
		})
	}
}
