package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cuttable is a store a replica reaches through a link the test can cut, as if the
// replica's process had died or its network had gone.
type cuttable struct {
	share.Store
	cut atomic.Bool
}

var errCut = errors.New("link cut")

func (c *cuttable) Sync(ctx context.Context, r share.Report) (share.View, error) {
	if c.cut.Load() {
		return share.View{}, errCut
	}
	return c.Store.Sync(ctx, r)
}

func (c *cuttable) Leave(ctx context.Context, r share.Report) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Store.Leave(ctx, r)
}

// replicas is several replicas of one vertex sharing a memstore on one manual clock.
type replicas struct {
	t     *testing.T
	cfg   ratelimit.Config
	clk   *clock.Manual
	store *memstore.Store
	reps  map[string]*replicaUnderTest
	// kept[epoch] is the tokens granted in that epoch, summed over replicas.
	kept map[int64]int64
}

type replicaUnderTest struct {
	l    *ratelimit.Limiter
	link *cuttable
	dead bool
}

func newReplicas(t *testing.T, cfg ratelimit.Config) *replicas {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	p := &replicas{t: t, cfg: cfg, clk: clk, store: memstore.New(clk),
		reps: map[string]*replicaUnderTest{}, kept: map[int64]int64{}}
	t.Cleanup(func() {
		for _, r := range p.reps {
			r.l.Close(context.Background())
		}
	})
	return p
}

func (p *replicas) join(id string) {
	p.t.Helper()
	link := &cuttable{Store: p.store}
	l, err := ratelimit.New(p.cfg, ratelimit.WithClock(p.clk), ratelimit.WithStore(link), ratelimit.WithReplicaID(id))
	if err != nil {
		p.t.Fatal(err)
	}
	p.reps[id] = &replicaUnderTest{l: l, link: link}
}

func (p *replicas) leave(id string) {
	p.t.Helper()
	if err := p.reps[id].l.Close(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	delete(p.reps, id)
}

// crash makes a replica stop: no more heartbeats, no more calls, no goodbye.
func (p *replicas) crash(id string) {
	r := p.reps[id]
	r.link.cut.Store(true)
	r.dead = true
}

// drain has every live replica take all it can now, and records the grants.
func (p *replicas) drain() map[string]int64 {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	got := map[string]int64{}
	for id, r := range p.reps {
		if r.dead {
			continue
		}
		g, err := r.l.Acquire(ctx, 1_000_000)
		if err != nil && !errors.Is(err, ratelimit.ErrRateLimited) {
			p.t.Fatalf("%s: %v", id, err)
		}
		got[id] = int64(g.Tokens)
		p.kept[r.l.Status().Epoch] += int64(g.Tokens)
	}
	return got
}

// run advances the clock in sync-interval steps for d, draining at each step, and
// checks that no epoch granted more than the pool.
func (p *replicas) run(d time.Duration) {
	p.t.Helper()
	for range int(d / ratelimit.DefaultSyncInterval) {
		p.drain()
		p.clk.Advance(ratelimit.DefaultSyncInterval)
	}
	p.drain()
	for e, n := range p.kept {
		if n > p.cfg.Max {
			p.t.Fatalf("epoch %d granted %d tokens; pool %d", e, n, p.cfg.Max)
		}
	}
}

// nextEpoch moves to the start of the next epoch and returns what each replica
// takes there.
func (p *replicas) nextEpoch() map[string]int64 {
	p.t.Helper()
	now := p.clk.Now()
	p.run(now.Truncate(time.Second).Add(time.Second).Sub(now) - ratelimit.DefaultSyncInterval)
	p.clk.Advance(ratelimit.DefaultSyncInterval)
	return p.drain()
}

func flat(max int64) ratelimit.Config { return ratelimit.Config{Max: max, Min: max} }

func TestSharesSplitExactlyByRank(t *testing.T) {
	for _, tt := range []struct {
		max  int64
		ids  []string
		want map[string]int64
	}{
		{10, []string{"a", "b", "c"}, map[string]int64{"a": 4, "b": 3, "c": 3}},
		{11, []string{"c", "a", "b"}, map[string]int64{"a": 4, "b": 4, "c": 3}},
		{2, []string{"a", "b", "c"}, map[string]int64{"a": 1, "b": 1, "c": 0}},
		{997, []string{"r1", "r2", "r3", "r4", "r5"}, map[string]int64{"r1": 200, "r2": 200, "r3": 199, "r4": 199, "r5": 199}},
	} {
		t.Run(fmt.Sprint(tt.max, tt.ids), func(t *testing.T) {
			p := newReplicas(t, flat(tt.max))
			for _, id := range tt.ids {
				p.join(id)
			}
			p.run(3 * time.Second)
			got := p.nextEpoch()
			sum := int64(0)
			for id, want := range tt.want {
				sum += got[id]
				if got[id] != want {
					t.Errorf("%s took %d; want %d (all: %v)", id, got[id], want, got)
				}
			}
			if sum != tt.max {
				t.Errorf("shares sum to %d; want the whole pool %d", sum, tt.max)
			}
		})
	}
}

func TestJoiningReplicaWaitsForAgreement(t *testing.T) {
	p := newReplicas(t, flat(10))
	p.join("b")
	p.join("c")
	p.run(2 * time.Second)
	if got := p.nextEpoch(); got["b"] != 5 || got["c"] != 5 {
		t.Fatalf("before the join: %v; want 5 each", got)
	}

	// "a" sorts first, so every rank moves when it joins.
	p.clk.Advance(300 * time.Millisecond)
	p.join("a")
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := p.reps["a"].l.Acquire(ctx, 1); !errors.Is(err, ratelimit.ErrAwaitingAgreement) {
		t.Fatalf("joiner's first Acquire: %v; want ErrAwaitingAgreement", err)
	}
	p.run(3 * time.Second) // asserts no epoch over the pool while the pool changes
	if got := p.nextEpoch(); got["a"] != 4 || got["b"] != 3 || got["c"] != 3 {
		t.Fatalf("after the join: %v; want a 4, b 3, c 3", got)
	}
	if s := p.reps["a"].l.Status(); s.Replicas != 3 || s.Rank != 0 {
		t.Fatalf("joiner status %+v; want replica count 3, rank 0", s)
	}
}

func TestLeavingReplicaGivesItsShareBack(t *testing.T) {
	p := newReplicas(t, flat(9))
	for _, id := range []string{"a", "b", "c"} {
		p.join(id)
	}
	p.run(2 * time.Second)
	if got := p.nextEpoch(); got["a"]+got["b"]+got["c"] != 9 {
		t.Fatalf("before: %v", got)
	}
	p.leave("b")
	// Survivors agree on two within a few syncs, and use it from the next epoch.
	p.run(time.Second)
	if got := p.nextEpoch(); got["a"] != 5 || got["c"] != 4 {
		t.Fatalf("after b left: %v; want a 5, c 4", got)
	}
}

func TestCrashedReplicaIsDroppedAfterStaleAfter(t *testing.T) {
	p := newReplicas(t, flat(9))
	for _, id := range []string{"a", "b", "c"} {
		p.join(id)
	}
	p.run(2 * time.Second)
	p.crash("c")
	// Heartbeats stop; within staleAfter (2s) plus an epoch the survivors take all.
	p.run(3 * time.Second)
	if got := p.nextEpoch(); got["a"] != 5 || got["b"] != 4 {
		t.Fatalf("after c crashed: %v; want a 5, b 4", got)
	}
	if m := p.store.Members(); len(m) != 2 {
		t.Fatalf("members %v; want a and b", m)
	}
}

func TestChurnNeverExceedsPool(t *testing.T) {
	// Replicas join, leave and crash in turn; at every step every live replica takes
	// all it can, and no epoch ever grants more than the pool (checked by run).
	p := newReplicas(t, flat(100))
	steps := []func(){
		func() { p.join("m") },
		func() { p.join("d") },
		func() { p.join("x") },
		func() { p.join("a") },
		func() { p.crash("d") },
		func() { p.leave("x") },
		func() { p.join("b") },
		func() { p.join("z") },
		func() { p.crash("m") },
		func() { p.leave("a") },
	}
	for _, step := range steps {
		step()
		p.run(1700 * time.Millisecond)
	}
	p.run(3 * time.Second)
	got := p.nextEpoch()
	var live []string
	sum := int64(0)
	for id, n := range got {
		live = append(live, id)
		sum += n
	}
	sort.Strings(live)
	if sum != 100 || fmt.Sprint(live) != "[b z]" || got["b"] != 50 {
		t.Fatalf("settled pool %v took %v (sum %d); want b and z, 50 each", live, got, sum)
	}
}

func TestStoreSync(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	s := memstore.New(clk)
	ctx := context.Background()
	v, _ := s.Sync(ctx, share.Report{ID: "b", Replicas: 0, StaleAfter: time.Second})
	if v.Agreed || v.Live != 1 || v.Rank != 0 {
		t.Fatalf("first sync %+v; want disagreement, live 1", v)
	}
	v, _ = s.Sync(ctx, share.Report{ID: "b", Replicas: 1, StaleAfter: time.Second})
	if !v.Agreed || v.Replicas != 1 {
		t.Fatalf("second sync %+v; want AGREE(1)", v)
	}
	v, _ = s.Sync(ctx, share.Report{ID: "a", Replicas: 0, StaleAfter: time.Second})
	if v.Agreed || v.Replicas != 1 || v.Live != 2 || v.Rank != 0 {
		t.Fatalf("joiner %+v; want DISAGREE, largest reported 1, live 2, rank 0", v)
	}
	clk.Advance(1500 * time.Millisecond)
	v, _ = s.Sync(ctx, share.Report{ID: "a", Replicas: 2, StaleAfter: time.Second})
	if v.Live != 1 || v.Agreed {
		t.Fatalf("after b went stale %+v; want live 1, no agreement on 2", v)
	}
	s.SetAvailable(false)
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); !errors.Is(err, memstore.ErrUnavailable) {
		t.Fatalf("down store: %v", err)
	}
}

// TestEachReplicasOwnLease checks that the store drops a silent replica after the
// staleAfter that replica reported, not after one of the store's own.
func TestEachReplicasOwnLease(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	s := memstore.New(clk)
	ctx := context.Background()
	for _, r := range []share.Report{
		{ID: "short", StaleAfter: time.Second},
		{ID: "default"}, // ratelimit.DefaultStaleAfter, 2s
		{ID: "long", StaleAfter: 3 * time.Second},
	} {
		if _, err := s.Sync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		at   time.Duration
		want string
	}{
		{time.Second, "[default long short watcher]"}, // a lease still holds at its end
		{time.Second + time.Millisecond, "[default long watcher]"},
		{2*time.Second + time.Millisecond, "[long watcher]"},
		{3*time.Second + time.Millisecond, "[watcher]"},
	} {
		clk.Set(time.Unix(1_700_000_000, 0).Add(step.at))
		if _, err := s.Sync(ctx, share.Report{ID: "watcher", StaleAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s.Members()); got != step.want {
			t.Fatalf("after %v: members %s; want %s", step.at, got, step.want)
		}
	}
}

// TestCrashedReplicaKeepsItsShareForItsLease runs limiters with different leases:
// the survivors get a crashed replica's share back only once its own lease, not
// theirs, has run out, so no epoch grants more than the pool meanwhile.
func TestCrashedReplicaKeepsItsShareForItsLease(t *testing.T) {
	p := newReplicas(t, flat(10))
	long := flat(10)
	long.StaleAfter = 5 * time.Second
	p.joinWith("a", flat(10))
	p.joinWith("b", long)
	p.run(2 * time.Second)
	if got := p.nextEpoch(); got["a"] != 5 || got["b"] != 5 {
		t.Fatalf("before the crash: %v", got)
	}
	p.crash("b")
	p.run(4 * time.Second) // past a's lease of 2s, within b's of 5s
	if m := p.store.Members(); fmt.Sprint(m) != "[a b]" {
		t.Fatalf("members %v within b's lease; want a and b", m)
	}
	if got := p.nextEpoch(); got["a"] != 5 {
		t.Fatalf("a took %d within b's lease; want its share of 5", got["a"])
	}
	p.run(2 * time.Second)
	if got := p.nextEpoch(); got["a"] != 10 {
		t.Fatalf("a took %d after b's lease; want all 10", got["a"])
	}
}

// joinWith adds a replica with extra options.
func (p *replicas) joinWith(id string, cfg ratelimit.Config, opts ...ratelimit.Option) *ratelimit.Limiter {
	p.t.Helper()
	link := &cuttable{Store: p.store}
	opts = append([]ratelimit.Option{ratelimit.WithClock(p.clk), ratelimit.WithStore(link), ratelimit.WithReplicaID(id)}, opts...)
	l, err := ratelimit.New(cfg, opts...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.reps[id] = &replicaUnderTest{l: l, link: link}
	return l
}

func TestStoreOutage(t *testing.T) {
	for _, tt := range []struct {
		policy    ratelimit.StoreFailurePolicy
		wantShare int64 // once the lease has run out
		reason    error
	}{
		{ratelimit.Pause, 0, ratelimit.ErrStoreUnavailable},
		{ratelimit.LastKnown, 5, ratelimit.ErrRateLimited},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			cfg := flat(10)
			cfg.OnStoreFailure = tt.policy
			p := newReplicas(t, cfg)
			p.joinWith("a", cfg)
			p.joinWith("b", cfg)
			p.run(2 * time.Second)
			if got := p.nextEpoch(); got["a"] != 5 || got["b"] != 5 {
				t.Fatalf("before the outage: %v", got)
			}
			p.store.SetAvailable(false)
			// Within the lease (staleAfter 2s) both keep their shares.
			p.run(200 * time.Millisecond)
			if got := p.nextEpoch(); got["a"] != 5 || got["b"] != 5 {
				t.Fatalf("within the lease: %v", got)
			}
			p.run(2 * time.Second)
			got := p.nextEpoch()
			if got["a"] != tt.wantShare || got["b"] != tt.wantShare {
				t.Fatalf("after the lease: %v; want %d each", got, tt.wantShare)
			}
			s := p.reps["a"].l.Status()
			if s.StoreUp {
				t.Fatal("status says the store is up")
			}
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			defer cancel()
			if _, err := p.reps["a"].l.Acquire(ctx, 1); !errors.Is(err, tt.reason) {
				t.Fatalf("Acquire = %v; want %v", err, tt.reason)
			}
			// Back within a second of the store: syncs back off to at most 400ms,
			// and the pool is used again from the next epoch.
			p.store.SetAvailable(true)
			p.run(900 * time.Millisecond)
			if got := p.nextEpoch(); got["a"] != 5 || got["b"] != 5 {
				t.Fatalf("after the store came back: %v", got)
			}
			if !p.reps["a"].l.Status().StoreUp {
				t.Fatal("status says the store is down")
			}
		})
	}
}

func TestRegistrationFailureTakesNoTokens(t *testing.T) {
	p := newReplicas(t, flat(10))
	p.store.SetAvailable(false)
	l := p.joinWith("a", flat(10))
	p.clk.Advance(0) // the first sync, from the background
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := l.Acquire(ctx, 1); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("Acquire before registering = %v; want ErrStoreUnavailable", err)
	}
	p.run(3 * time.Second)
	if got := p.drain(); got["a"] != 0 {
		t.Fatalf("took %d without a store", got["a"])
	}
	p.store.SetAvailable(true)
	p.run(time.Second)
	if got := p.nextEpoch(); got["a"] != 10 {
		t.Fatalf("after registering: %v; want 10", got)
	}
}

func TestResumedRampUp(t *testing.T) {
	cfg := ratelimit.Config{Max: 100, Min: 10, RampUpDuration: 9 * time.Second, ResumedRampUp: true}
	p := newReplicas(t, cfg)
	p.joinWith("a", cfg)
	p.run(6 * time.Second) // the ramp climbs 10 a second while a drains it
	before := p.reps["a"].l.Status().PoolMilli
	if before < 40_000 {
		t.Fatalf("pool %d; want a ramp well under way", before)
	}
	p.leave("a")
	p.clk.Advance(5 * time.Second)
	// A replica registers from the background at once and starts its ramp at the
	// next epoch.
	startPool := func(id string, cfg ratelimit.Config) int64 {
		l := p.joinWith(id, cfg)
		p.clk.Advance(time.Second)
		return l.Status().PoolMilli
	}
	if got := startPool("b", cfg); got != before {
		t.Fatalf("b starts at %d milli-tokens; want the %d a left", got, before)
	}
	p.run(time.Second)
	if got := p.nextEpoch()["b"]; got*1000 < before {
		t.Fatalf("b took %d tokens; want at least the pool a left", got)
	}

	// Past the ttl, a newcomer starts from min again.
	p.store.SetTTL(time.Second)
	p.leave("b")
	p.clk.Advance(3 * time.Second)
	if got := startPool("c", cfg); got != 10_000 {
		t.Fatalf("after the ttl c starts at %d milli-tokens; want min", got)
	}
	// Without resumedRampUp, the saved pool is ignored.
	p.store.SetTTL(time.Hour)
	p.leave("c")
	cfg.ResumedRampUp = false
	if got := startPool("d", cfg); got != 10_000 {
		t.Fatalf("without resumedRampUp d starts at %d milli-tokens; want min", got)
	}
}

func TestFixedReplicas(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for rank, want := range []int{4, 3, 3} {
		l, err := ratelimit.New(flat(10), ratelimit.WithClock(clk), ratelimit.WithFixedReplicas(3, rank))
		if err != nil {
			t.Fatal(err)
		}
		if g, _ := l.Acquire(ctx, 100); g.Tokens != want {
			t.Errorf("rank %d took %d; want %d", rank, g.Tokens, want)
		}
		l.Close(context.Background())
	}
	for _, bad := range [][2]int{{3, 3}, {3, -1}, {-2, 0}} {
		if _, err := ratelimit.New(flat(10), ratelimit.WithFixedReplicas(bad[0], bad[1])); err == nil {
			t.Errorf("WithFixedReplicas(%d, %d) accepted", bad[0], bad[1])
		}
	}
}

func TestEpochObserver(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var got []ratelimit.EpochSummary
	l, err := ratelimit.New(ratelimit.Config{Max: 30, Min: 10, RampUpDuration: 2 * time.Second}, ratelimit.WithClock(clk),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) { got = append(got, s) }))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for range 3 {
		l.Acquire(ctx, 100)
		clk.Advance(time.Second)
	}
	want := []int64{10, 20, 30}
	if len(got) != 3 {
		t.Fatalf("%d summaries; want 3", len(got))
	}
	for i, s := range got {
		if s.Granted != want[i] || s.Share != want[i] || !s.Eligible || s.Epoch != 1_700_000_000+int64(i) {
			t.Errorf("epoch %d: %+v; want granted %d", i, s, want[i])
		}
	}
}

// skewed is a store whose clock runs ahead of the replica's by skew, as a Redis
// on another host would.
type skewed struct {
	share.Store
	skew time.Duration
}

func (s skewed) Sync(ctx context.Context, r share.Report) (share.View, error) {
	if !r.LeaseUntil.IsZero() {
		r.LeaseUntil = r.LeaseUntil.Add(-s.skew) // on the store's clock, as it gave it
	}
	v, err := s.Store.Sync(ctx, r)
	v.Time = v.Time.Add(s.skew)
	return v, err
}

func TestEpochsFollowTheStoreClock(t *testing.T) {
	// The store's clock is 400ms ahead: epochs turn when the store's second does,
	// at .6 of the replica's own second.
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	store := skewed{memstore.New(clk), 400 * time.Millisecond}
	l, err := ratelimit.New(flat(10), ratelimit.WithClock(clk), ratelimit.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	clk.Advance(2 * time.Second) // joined; local 1_700_000_002.0 = store .002.4
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if g, _ := l.Acquire(ctx, 100); g.Tokens != 10 {
		t.Fatalf("took %d; want the whole 10", g.Tokens)
	}
	if e := l.Status().Epoch; e != 1_700_000_002 {
		t.Fatalf("epoch %d; want the store's second 1700000002", e)
	}
	clk.Advance(599 * time.Millisecond)
	if g, _ := l.Acquire(ctx, 100); g.Tokens != 0 {
		t.Fatalf("took %d before the store's second turned", g.Tokens)
	}
	clk.Advance(time.Millisecond) // store .003.0
	if g, _ := l.Acquire(ctx, 100); g.Tokens != 10 || l.Status().Epoch != 1_700_000_003 {
		t.Fatalf("took %d in epoch %d at the store's new second; want 10 in 1700000003", g.Tokens, l.Status().Epoch)
	}
}
