package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

func TestMain(m *testing.M) {
	// No test of this package looks a name up in DNS: a query fails at
	// once, and the host names tests use (redistest.UnresolvableHost) are
	// answered without one.
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, network, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("redisstore tests send no DNS query (%s %s)", network, addr)
	}}
	goleak.VerifyTestMain(m)
}

func newStore(t *testing.T, srv *redistest.Server, prefix string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(srv.Client(t), prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSyncAgreement(t *testing.T) { forEachMode(t, testSyncAgreement) }

func testSyncAgreement(t *testing.T, d deployment) {
	s := d.store(t, "mv", redisstore.Options{})
	ctx := context.Background()
	sync := func(id string, size int) share.View {
		t.Helper()
		v, err := s.Sync(ctx, share.Report{ID: id, Replicas: size, StaleAfter: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := sync("b", 0); v.Agreed || v.Live != 1 || v.Rank != 0 {
		t.Fatalf("first sync %+v; want disagreement, live 1", v)
	}
	if v := sync("b", 1); !v.Agreed || v.Replicas != 1 {
		t.Fatalf("second sync %+v; want AGREE(1)", v)
	}
	if v := sync("a", 0); v.Agreed || v.Replicas != 1 || v.Live != 2 || v.Rank != 0 {
		t.Fatalf("joiner %+v; want DISAGREE with the largest size 1, live 2, rank 0", v)
	}
	sync("b", 2)
	if v := sync("a", 2); !v.Agreed || v.Replicas != 2 || v.Rank != 0 {
		t.Fatalf("%+v; want AGREE(2), a ranked first", v)
	}
	if v := sync("b", 2); v.Rank != 1 {
		t.Fatalf("b's rank %d; want 1", v.Rank)
	}
	// The store's clock is Redis TIME.
	v := sync("a", 2)
	if d := time.Since(v.Time); d < -time.Second || d > time.Second {
		t.Fatalf("store time %v is %v from this host's clock", v.Time, d)
	}
	// b stops syncing: after staleAfter it is gone from the replicas.
	deadline := time.Now().Add(5 * time.Second)
	for sync("a", 2).Live != 1 {
		if time.Now().After(deadline) {
			t.Fatal("b never went stale")
		}
		time.Sleep(50 * time.Millisecond) // Redis's clock must move past staleAfter
	}
	if v := sync("a", 1); !v.Agreed || v.Replicas != 1 {
		t.Fatalf("after b went stale: %+v; want AGREE(1)", v)
	}
}

// TestEachReplicasOwnLease checks that Redis drops a silent replica after the
// staleAfter that replica reported, and keeps the keys for the longest lease.
func TestEachReplicasOwnLease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{TTL: time.Second})
	ctx := context.Background()
	for _, r := range []share.Report{{ID: "short", StaleAfter: 200 * time.Millisecond}, {ID: "long", StaleAfter: time.Minute}} {
		if _, err := s.Sync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if ttl := srv.Do(t, "PTTL", s.Keys()[0]).(int64); ttl < 60_000 {
		t.Fatalf("heartbeats key ttl %dms; want at least twice the longest lease", ttl)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := s.Sync(ctx, share.Report{ID: "watcher", StaleAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if v.Live == 2 {
			break // short is gone; long, reported a minute, stays
		}
		if time.Now().After(deadline) {
			t.Fatalf("live %d; short never went stale", v.Live)
		}
		time.Sleep(50 * time.Millisecond) // Redis's clock must move past short's lease
	}
	if got := srv.Do(t, "ZRANGE", s.Keys()[2], 0, -1); fmt.Sprint(got) != "[long watcher]" {
		t.Fatalf("members %v; want long and watcher", got)
	}
}

func TestLeaveAndResume(t *testing.T) { forEachMode(t, testLeaveAndResume) }

func testLeaveAndResume(t *testing.T, d deployment) {
	s := d.store(t, "mv", redisstore.Options{TTL: 2 * time.Second})
	ctx := context.Background()
	s.Sync(ctx, share.Report{ID: "a", Replicas: 0})
	s.Sync(ctx, share.Report{ID: "b", Replicas: 0})
	if err := s.Leave(ctx, share.Report{ID: "a", Pool: 42_500}); err != nil {
		t.Fatal(err)
	}
	v, err := s.Sync(ctx, share.Report{ID: "b", Replicas: 1})
	if err != nil || !v.Agreed || v.Live != 1 || v.Resume != 42_500 {
		t.Fatalf("after a left: %+v, %v; want b alone and the pool a saved", v, err)
	}
	// Leaving without a pool keeps the saved one.
	s.Leave(ctx, share.Report{ID: "b"})
	if v, _ := s.Sync(ctx, share.Report{ID: "c"}); v.Resume != 42_500 {
		t.Fatalf("resume %d after a leave without a pool", v.Resume)
	}
	if ttl := d.do(t, "PTTL", s.Keys()[3]).(int64); ttl <= 0 || ttl > 2000 {
		t.Fatalf("resume key ttl %dms; want at most the store's 2s", ttl)
	}
}

func TestVerticesDoNotShareState(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newStore(t, srv, "pipe-a", redisstore.Options{})
	b := newStore(t, srv, "pipe-b", redisstore.Options{})
	ctx := context.Background()
	for range 2 {
		a.Sync(ctx, share.Report{ID: "x", Replicas: 1})
		a.Sync(ctx, share.Report{ID: "y", Replicas: 1})
	}
	v, _ := b.Sync(ctx, share.Report{ID: "z", Replicas: 0})
	if v.Live != 1 {
		t.Fatalf("vertex b sees %d replicas; want only its own", v.Live)
	}
	for _, k := range a.Keys() {
		if b.Keys()[0] == k {
			t.Fatalf("vertices share key %s", k)
		}
	}
}

func TestScriptsReloadAfterFlush(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{})
	ctx := context.Background()
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	srv.Do(t, "SCRIPT", "FLUSH")
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
}

// TestLimitersShareOneLimit runs three limiters on one Redis in real time,
// each taking tokens as fast as it can, until they have agreed in two epochs
// and granted the whole pool in one (within shareTimeout). No epoch grants
// more than the pool, and in every epoch where all three are in it their
// shares sum to exactly the pool: no token is lost to rounding. Whether a
// replica takes all of its share in a given wall-clock second is the
// scheduler's business, not the limiter's: the test waits for an epoch in
// which all three did, and does not ask it of every epoch.
func TestLimitersShareOneLimit(t *testing.T) { forEachMode(t, testLimitersShareOneLimit) }

// shareTimeout bounds the real-time tests of this package that wait for the
// limiters to reach a rate: a few seconds on an idle machine, many more on
// one whose cores other processes hold.
const shareTimeout = 30 * time.Second

func testLimitersShareOneLimit(t *testing.T, d deployment) {
	const max = 997
	type summary = ratelimit.EpochSummary
	var mu sync.Mutex
	byEpoch := map[int64][]summary{}
	var limiters []*ratelimit.Limiter
	for i := range 3 {
		store := d.store(t, "shared", redisstore.Options{})
		l, err := ratelimit.New(ratelimit.Config{Max: max, Min: max}, ratelimit.WithStore(store),
			ratelimit.WithReplicaID(fmt.Sprint("replica-", i)),
			ratelimit.WithEpochObserver(func(s summary) {
				mu.Lock()
				defer mu.Unlock()
				byEpoch[s.Epoch] = append(byEpoch[s.Epoch], s)
			}))
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
	}
	// check goes over the epochs that have ended and reports the epochs with
	// all three agreed and those of them that granted the whole pool.
	check := func(report bool) (full, used int) {
		mu.Lock()
		defer mu.Unlock()
		for e, ss := range byEpoch {
			var shares, granted int64
			eligible := 0
			for _, s := range ss {
				shares += s.Share
				granted += s.Granted
				if s.Eligible {
					eligible++
				}
			}
			if report && granted > max {
				t.Errorf("epoch %d granted %d; max %d (%+v)", e, granted, max, ss)
			}
			if eligible == 3 && len(ss) == 3 {
				full++
				if report && shares != max {
					t.Errorf("epoch %d: shares %d; want exactly %d (%+v)", e, shares, max, ss)
				}
				if granted == max {
					used++
				}
			}
		}
		return full, used
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range limiters {
		wg.Go(func() {
			for ctx.Err() == nil {
				l.Acquire(ctx, 100)
			}
		})
	}
	runtest.WaitFor(t, "two full epochs, one used in full", func() bool { full, used := check(false); return full >= 2 && used >= 1 },
		runtest.Within(shareTimeout), runtest.Every(100*time.Millisecond), runtest.Soft())
	waited := time.Since(began)
	cancel()
	wg.Wait()
	for _, l := range limiters {
		l.Close(context.Background())
	}
	full, used := check(true)
	if full < 2 || used < 1 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("in %v, %d epochs with all three replicas agreed, %d of them granting all %d; want 2 and 1: %v",
			waited.Round(time.Millisecond), full, used, max, byEpoch)
	}
}

// open opens a store for conn and closes it when the test ends.
func open(t *testing.T, ctx context.Context, conn redisstore.Conn) (*redisstore.Store, error) {
	t.Helper()
	s, err := redisstore.Open(ctx, conn, "mv", redisstore.Options{})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestOpenClassifiesErrors(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name string
		conn redisstore.Conn
		want error // nil: a store, whether Redis is there or away
	}{
		{"right password", redisstore.Conn{URL: "redis://" + srv.Addr, Password: "s3cret"}, nil},
		{"wrong password", redisstore.Conn{URL: "redis://:nope@" + srv.Addr}, redisstore.ErrAuth},
		{"no password", redisstore.Conn{URL: "redis://" + srv.Addr}, redisstore.ErrAuth},
		{"unknown host", redisstore.Conn{URL: "redis://" + redistest.UnresolvableHost + ":6379"}, redisstore.ErrHost},
		{"nothing listening", redisstore.Conn{URL: "redis://127.0.0.1:1"}, nil},
		{"bad URL", redisstore.Conn{URL: "http://:s3cret@" + srv.Addr}, redisstore.ErrInvalidConn},
		{"no URL", redisstore.Conn{}, redisstore.ErrInvalidConn},
		{"sentinel without endpoints", redisstore.Conn{MasterName: "mymaster"}, redisstore.ErrInvalidConn},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := open(t, ctx, tt.conn)
			switch {
			case tt.want == nil && (err != nil || s == nil):
				t.Fatalf("Open = %v, %v; want a store", s, err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Open = %v; want %v", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("Open = %v; the error shows the password", err)
			}
		})
	}
}

func TestClose(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	s, err := redisstore.Open(ctx, redisstore.Conn{URL: "redis://" + srv.Addr}, "mv", redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err == nil {
		t.Fatal("Sync after Close worked; want the client Open made closed")
	}
	// A store on the caller's client leaves the client alone.
	client := srv.Client(t)
	mine := newStoreOn(t, client)
	if err := mine.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatalf("Sync on the caller's client after Close: %v", err)
	}
}

func newStoreOn(t *testing.T, client *redis.Client) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, "mv", redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNewWithRedisDown checks that a limiter starts at once on a store whose Redis
// has gone: New does no I/O, and the limiter takes no tokens.
func TestNewWithRedisDown(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	s, err := open(t, ctx, redisstore.Conn{URL: "redis://" + srv.Addr, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	l, err := ratelimit.New(ratelimit.Config{Max: 10}, ratelimit.WithStore(s))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if took > time.Second { // far under the dial timeout
		t.Fatalf("New took %v with Redis down", took)
	}
	if g, r := l.TryAcquire(1); g.Tokens != 0 || r == ratelimit.NotThrottled {
		t.Fatalf("TryAcquire without a store = %d, %v; want no tokens", g.Tokens, r)
	}
}

func TestTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := open(t, ctx, redisstore.Conn{URL: "rediss://" + srv.Addr, TLS: srv.TLSConfig()})
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatalf("sync over TLS: %v", err)
	}
	// Without the test's CA, the system's roots do not trust the server.
	bad := &tls.Config{MinVersion: tls.VersionTLS12}
	if _, err := open(t, ctx, redisstore.Conn{URL: "rediss://" + srv.Addr, TLS: bad}); !errors.Is(err, redisstore.ErrTLS) {
		t.Fatalf("with another CA: %v; want ErrTLS", err)
	}
}

func TestSentinel(t *testing.T) {
	sn := redistest.StartSentinel(t, redistest.Options{Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// MasterName selects sentinel mode.
	s, err := open(t, ctx, redisstore.Conn{MasterName: sn.MasterName, Endpoints: sn.Endpoints(), Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatalf("through the sentinels: %v", err)
	}
	sn.Failover(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Sync(ctx, share.Report{ID: "a", Replicas: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sync after the failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // the client finds the new master on its own
	}
}

// TestCluster opens a store on a Redis Cluster from its seed addresses: every
// key of a vertex, per-key counts included, is in one slot, and Open tells a
// wrong password and a database other than 0 apart from Redis being away.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.Options{Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// ClusterAddrs selects cluster mode; one seed is enough to find the rest.
	s, err := open(t, ctx, redisstore.Conn{ClusterAddrs: c.Addrs()[:1], Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatalf("sync on the cluster: %v", err)
	}
	granted := make([]int, 3)
	reqs := []ratelimit.KeyRequest{{Key: "a", Want: 1}, {Key: "{b}", Want: 1}, {Key: "c}", Want: 1}}
	if _, err := s.TakeKeys(ctx, 5, reqs, granted); err != nil || fmt.Sprint(granted) != "[1 1 1]" {
		t.Fatalf("TakeKeys on the cluster = %v, %v; want [1 1 1]", granted, err)
	}
	// The byte limit's pool of the same vertex syncs on the cluster too, in
	// the vertex's slot.
	bytes := s.Limit("bytes")
	if v, err := bytes.Sync(ctx, share.Report{ID: "a"}); err != nil || v.Live != 1 {
		t.Fatalf("sync of the bytes pool on the cluster = %+v, %v", v, err)
	}
	client := c.Client(t)
	keys := append(s.Keys(), bytes.Keys()...)
	for _, r := range reqs {
		keys = append(keys, s.KeyName(r.Key))
	}
	want, err := client.ClusterKeySlot(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if slot, err := client.ClusterKeySlot(ctx, k).Result(); err != nil || slot != want {
			t.Errorf("key %s in slot %d (%v); want %d, the slot of %s", k, slot, err, want, keys[0])
		}
	}
	for _, tt := range []struct {
		name string
		conn redisstore.Conn
		want error
	}{
		{"wrong password", redisstore.Conn{ClusterAddrs: c.Addrs(), Password: "nope"}, redisstore.ErrAuth},
		{"database 1", redisstore.Conn{ClusterAddrs: c.Addrs(), Password: "s3cret", DB: new(int(1))}, redisstore.ErrInvalidConn},
		{"with a URL", redisstore.Conn{ClusterAddrs: c.Addrs(), URL: "redis://" + c.Addrs()[0]}, redisstore.ErrInvalidConn},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := open(t, ctx, tt.conn); !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v; want %v", err, tt.want)
			}
		})
	}
}

// TestSignalsAsTheGoStoreDoes runs a sequence of throttle signals through the
// script and checks each view's adaptation against share.Adaptation's
// rule applied at the store's time of that sync. The key expires with the
// others.
func TestSignalsAsTheGoStoreDoes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{TTL: time.Minute})
	ctx := context.Background()
	v, err := s.Sync(ctx, share.Report{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Adaptation != (share.Adaptation{}) {
		t.Fatalf("adaptation before any signal: %+v; want none", v.Adaptation)
	}
	e := v.Time.Unix()
	lead := 200 * time.Millisecond
	var want share.Adaptation
	for i, sig := range []*share.Signal{
		{Epoch: e, Cut: true, Pool: 50_000, Ceiling: 100_000, Floor: 80_000, Lead: lead},
		{Epoch: e, Cut: true, Pool: 25_000, Ceiling: 50_000, Lead: lead}, // before the cut took effect
		nil,
		{Epoch: e, PauseUntil: v.Time.Add(1500 * time.Millisecond)},
		{Epoch: e, PauseUntil: v.Time.Add(700 * time.Millisecond)}, // the pause only grows
		{Epoch: e + 5, Cut: true, Pool: 12_000, Ceiling: 24_500, Lead: lead},
		{Epoch: e + 5, Cut: true, Pool: 6_000, Lead: lead},                            // before the cut took effect
		{Epoch: e + 6, Cut: true, Pool: 1_000_000_000_000_000, Lead: 2 * time.Second}, // the largest pool, a long lead
	} {
		v, err := s.Sync(ctx, share.Report{ID: "a", Signal: sig})
		if err != nil {
			t.Fatal(err)
		}
		if sig != nil {
			want = want.Signaled(*sig, v.Time)
		}
		if v.Adaptation != want {
			t.Fatalf("sync %d with %+v: %+v; want %+v", i, sig, v.Adaptation, want)
		}
	}
	if want.From < e+7 || want.Pool != 1_000_000_000_000_000 || want.Ceiling != 0 {
		t.Fatalf("the rule itself: %+v; want the cut of the signal in epoch %d", want, e+6)
	}
	if ttl := srv.Do(t, "PTTL", s.Keys()[4]).(int64); ttl <= 0 || ttl > 60_000 {
		t.Errorf("PTTL of %s = %d; want it to expire within the ttl", s.Keys()[4], ttl)
	}
}

// TestViewsAsTheGoStoreDoes runs one random sequence of syncs and leaves
// through the script and through memstore, the reference, and checks that
// every view agrees on the agreement, the replica count, the live count and the
// rank. No lease runs out here: the next test covers that.
func TestViewsAsTheGoStoreDoes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{})
	ref := memstore.New(nil)
	ctx := context.Background()
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	live := map[string]int{} // the live count each replica saw last
	rng := rand.New(rand.NewPCG(1, 2))
	agreed := 0
	for i := range 400 {
		id := ids[rng.IntN(len(ids))]
		if rng.IntN(30) == 0 {
			if err := s.Leave(ctx, share.Report{ID: id}); err != nil {
				t.Fatal(err)
			}
			ref.Leave(ctx, share.Report{ID: id})
			delete(live, id)
			continue
		}
		size := live[id] // as a limiter reports, mostly
		if rng.IntN(15) == 0 {
			size = rng.IntN(len(ids) + 1)
		}
		r := share.Report{ID: id, Replicas: size, StaleAfter: time.Minute}
		got, err := s.Sync(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Sync(ctx, r)
		if got.Agreed != want.Agreed || got.Replicas != want.Replicas || got.Live != want.Live || got.Rank != want.Rank {
			t.Fatalf("op %d, %+v: agreed %v, size %d, live %d, rank %d; the Go store says %v, %d, %d, %d", i, r,
				got.Agreed, got.Replicas, got.Live, got.Rank, want.Agreed, want.Replicas, want.Live, want.Rank)
		}
		if got.Agreed {
			agreed++
		}
		live[id] = got.Live
	}
	if agreed < 20 {
		t.Fatalf("only %d views agreed; the sequence hardly tests agreement", agreed)
	}
}

// TestSweepsStaleReplicasOverSeveralSyncs has more replicas go stale at once
// than a sync drops (16): they go over the next syncs, the live count leaves
// them out from the first, and the replicas agree only once they are all gone,
// since until then the ranks still count them.
func TestSweepsStaleReplicasOverSeveralSyncs(t *testing.T) {
	const sweep, stale = 16, 40
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{})
	ctx := context.Background()
	sync := func(id string, lease time.Duration) share.View {
		t.Helper()
		v, err := s.Sync(ctx, share.Report{ID: id, Replicas: 2, StaleAfter: lease})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	card := func() []int64 {
		var n []int64
		for _, k := range s.Keys()[:3] {
			n = append(n, srv.Do(t, "ZCARD", k).(int64))
		}
		return n
	}
	// Replicas that sort before a and b and report the same size, with a short
	// lease; a and b stay.
	const short = 300 * time.Millisecond
	for i := range stale {
		sync(fmt.Sprintf("0-%02d", i), short)
	}
	last := sync("a", time.Minute).Time
	if v := sync("b", time.Minute); v.Live != stale+2 {
		t.Fatalf("live %d before any lease ran out; want %d", v.Live, stale+2)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !redisTime(t, srv).After(last.Add(short + 5*time.Millisecond)) {
		if time.Now().After(deadline) {
			t.Fatal("Redis TIME does not move")
		}
		time.Sleep(10 * time.Millisecond) // Redis's clock must move past the short leases
	}
	left := stale
	for i := 0; ; i++ {
		id := []string{"a", "b"}[i%2]
		v := sync(id, time.Minute)
		left = max(left-sweep, 0)
		if n := card(); n[0] != int64(2+left) || n[1] != n[0] || n[2] != n[0] {
			t.Fatalf("sync %d: heartbeats, sizes and members hold %v replicas; want %d each", i, n, 2+left)
		}
		if v.Live != 2 {
			t.Fatalf("sync %d: live %d; want 2", i, v.Live)
		}
		if left > 0 {
			if v.Agreed || v.Rank < i%2 {
				t.Fatalf("sync %d, %d stale left: %+v; want no agreement, a rank of at least %d", i, left, v, i%2)
			}
			continue
		}
		if !v.Agreed || v.Replicas != 2 || v.Rank != i%2 {
			t.Fatalf("sync %d, all swept: %+v; want AGREE(2), rank %d", i, v, i%2)
		}
		if i+1 != (stale+sweep-1)/sweep {
			t.Fatalf("swept in %d syncs", i+1)
		}
		break
	}
}

// redisTime returns the server's clock, the store's.
func redisTime(t *testing.T, srv *redistest.Server) time.Time {
	t.Helper()
	r := srv.Do(t, "TIME").([]any)
	sec, _ := strconv.ParseInt(r[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(r[1].(string), 10, 64)
	return time.Unix(sec, usec*1000)
}

// TestLiveLimitsAsTheGoStoreDoes proposes changes of the live limit through
// the script and checks each view against share.ProposeLimit, the rule.
func TestLiveLimitsAsTheGoStoreDoes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, "mv", redisstore.Options{TTL: time.Minute})
	ctx := context.Background()
	lead := 500 * time.Millisecond
	var want []share.LiveLimit
	for i, spec := range []string{"", `{"max":300}`, `{"max":300}`, "", `{"max":600}`, `{"max":150}`, `{"max":150}`, `{"max":"é"}`} {
		r := share.Report{ID: "a"}
		if spec != "" {
			r.Limit = &share.LimitChange{Spec: spec, Lead: lead}
		}
		v, err := s.Sync(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Limit != nil {
			want = share.ProposeLimit(want, *r.Limit, v.Time)
		}
		if fmt.Sprint(v.Limits) != fmt.Sprint(want) {
			t.Fatalf("sync %d proposing %q: %v; want %v", i, spec, v.Limits, want)
		}
	}
	if len(want) != 2 || want[1].Gen != 4 {
		t.Fatalf("the rule itself: %v; want the last two of four changes", want)
	}
	if ttl := srv.Do(t, "PTTL", s.Keys()[5]).(int64); ttl <= 0 || ttl > 60_000 {
		t.Errorf("PTTL of %s = %d; want it to expire within the ttl", s.Keys()[5], ttl)
	}
}

// TestLimit: another limit of a vertex has keys of its own, with the vertex's
// hash tag, and its replicas are not the store's.
func TestLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	client := srv.Client(t)
	s, err := redisstore.New(client, "mv", redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Limit("bytes")
	for _, k := range b.Keys() {
		if !strings.HasPrefix(k, "sluice:{mv}:bytes:") {
			t.Errorf("key %s; want it under sluice:{mv}:bytes:", k)
		}
	}
	ctx := context.Background()
	if _, err := s.Sync(ctx, share.Report{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Sync(ctx, share.Report{ID: "b"}); err != nil || v.Live != 1 {
		t.Fatalf("bytes pool: %+v, %v; want b alone", v, err)
	}
}
