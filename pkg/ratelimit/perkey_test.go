package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
)

// epochStart is a whole second, so that the manual clock starts an epoch.
var epochStart = time.Unix(1_700_000_000, 0)

func newKeyLimiter(t *testing.T, cfg ratelimit.KeyConfig, opts ...ratelimit.Option) *ratelimit.KeyLimiter {
	t.Helper()
	k, err := ratelimit.NewKeyLimiter(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// take asks k for the keys and wants given as "key", want, "key", want, ...
// and returns the grants as key=granted.
func take(t *testing.T, k *ratelimit.KeyLimiter, pairs ...any) string {
	t.Helper()
	var reqs []ratelimit.KeyRequest
	for i := 0; i < len(pairs); i += 2 {
		reqs = append(reqs, ratelimit.KeyRequest{Key: pairs[i].(string), Want: pairs[i+1].(int)})
	}
	granted := make([]int, len(reqs))
	if _, err := k.TryAcquire(context.Background(), reqs, granted); err != nil {
		t.Fatal(err)
	}
	s := ""
	for i, r := range reqs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%d", r.Key, granted[i])
	}
	return s
}

func TestKeyLimiterCountsEachKeyPerEpoch(t *testing.T) {
	clk := clock.NewManual(epochStart)
	k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 5}, ratelimit.WithClock(clk))
	steps := []struct {
		advance time.Duration
		pairs   []any
		want    string
	}{
		{0, []any{"a", 3, "b", 7}, "a=3 b=5"},
		{100 * time.Millisecond, []any{"a", 3, "b", 1, "c", 0}, "a=2 b=0 c=0"},
		{800 * time.Millisecond, []any{"a", 1}, "a=0"},
		{100 * time.Millisecond, []any{"a", 9, "b", 2}, "a=5 b=2"}, // the next epoch
		{999 * time.Millisecond, []any{"b", 9}, "b=3"},
		{time.Millisecond, []any{"b", 9}, "b=5"},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if got := take(t, k, s.pairs...); got != s.want {
			t.Fatalf("step %d: %s; want %s", i, got, s.want)
		}
	}
	if st := k.Status(); st.Granted != 3+5+2+5+2+3+5 || st.Keys != 2 || !st.StoreUp {
		t.Fatalf("status %+v", st)
	}
}

func TestKeyLimiterShareOfFixedReplicas(t *testing.T) {
	for rank, want := range []string{"a=4", "a=3", "a=3"} {
		k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 10}, ratelimit.WithClock(clock.NewManual(epochStart)),
			ratelimit.WithKeyShare(func() (int, int) { return 3, rank }))
		if got := take(t, k, "a", 10); got != want {
			t.Errorf("rank %d of 3: %s; want %s", rank, got, want)
		}
	}
	k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 10}, ratelimit.WithKeyShare(func() (int, int) { return 0, 0 }))
	if got := take(t, k, "a", 10); got != "a=0" {
		t.Errorf("outside a pool: %s; want nothing", got)
	}
}

// TestKeyLimiterEvictsTheLeastRecentlyUsed keeps at most MaxKeys keys: a key
// forgotten in this process loses its count, which is why evictions are
// counted.
func TestKeyLimiterEvictsTheLeastRecentlyUsed(t *testing.T) {
	clk := clock.NewManual(epochStart)
	k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 2, MaxKeys: 2}, ratelimit.WithClock(clk))
	take(t, k, "a", 2, "b", 2)
	take(t, k, "a", 1) // a is now the most recently used
	if got := take(t, k, "c", 2); got != "c=2" {
		t.Fatal(got)
	}
	if st := k.Status(); st.Keys != 2 || st.Evictions != 1 {
		t.Fatalf("status %+v; want 2 keys and 1 eviction", st)
	}
	if got := take(t, k, "a", 2); got != "a=0" {
		t.Fatalf("a, kept: %s; want its count kept", got)
	}
	if got := take(t, k, "b", 2); got != "b=2" {
		t.Fatalf("b, forgotten: %s; want a fresh count", got)
	}
	if st := k.Status(); st.Evictions != 2 {
		t.Fatalf("evictions %d; want 2", st.Evictions)
	}
	// Keys of past epochs are the least recently used: they go first.
	clk.Advance(time.Second)
	take(t, k, "d", 1)
	take(t, k, "e", 1)
	if got := take(t, k, "d", 5); got != "d=1" {
		t.Fatalf("d: %s", got)
	}
}

// TestKeyLimitersShareThroughAStore runs two replicas on one store: together
// they never grant a key more than Max in an epoch, each batch is one call,
// and a key the store said is used up costs no call until the next epoch.
func TestKeyLimitersShareThroughAStore(t *testing.T) {
	clk := clock.NewManual(epochStart)
	store := memstore.New(clk)
	a := newKeyLimiter(t, ratelimit.KeyConfig{Max: 10}, ratelimit.WithClock(clk), ratelimit.WithKeyStore(store))
	b := newKeyLimiter(t, ratelimit.KeyConfig{Max: 10}, ratelimit.WithClock(clk), ratelimit.WithKeyStore(store))
	if got := take(t, a, "x", 8, "y", 3); got != "x=8 y=3" {
		t.Fatal(got)
	}
	if got := take(t, b, "x", 8, "y", 9, "z", 1); got != "x=2 y=7 z=1" {
		t.Fatal(got)
	}
	if n := store.KeyCalls(); n != 2 {
		t.Fatalf("%d store calls for 2 batches", n)
	}
	if got := take(t, b, "x", 1, "y", 1); got != "x=0 y=0" || store.KeyCalls() != 2 {
		t.Fatalf("%s after %d calls; want nothing, without a call", got, store.KeyCalls())
	}
	clk.Advance(time.Second)
	if got := take(t, b, "x", 20); got != "x=10" || store.KeyCalls() != 3 {
		t.Fatalf("next epoch: %s after %d calls", got, store.KeyCalls())
	}
}

func TestKeyLimiterStoreDown(t *testing.T) {
	for _, tt := range []struct {
		policy ratelimit.StoreFailurePolicy
		want   string
	}{
		{ratelimit.Pause, "x=0"},
		{ratelimit.LastKnown, "x=5"}, // rank 0 of 2: half of 10
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			clk := clock.NewManual(epochStart)
			store := memstore.New(clk)
			k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 10, OnStoreFailure: tt.policy}, ratelimit.WithClock(clk),
				ratelimit.WithKeyStore(store), ratelimit.WithKeyShare(func() (int, int) { return 2, 0 }))
			store.SetAvailable(false)
			if got := take(t, k, "x", 9); got != tt.want {
				t.Fatalf("store down: %s; want %s", got, tt.want)
			}
			if k.Status().StoreUp {
				t.Fatal("status says the store is up")
			}
			store.SetAvailable(true)
			if got := take(t, k, "x", 1); got != "x=0" || store.KeyCalls() != 0 {
				t.Fatalf("within the backoff: %s after %d calls; want the policy, no call", got, store.KeyCalls())
			}
			clk.Advance(time.Second)
			if got := take(t, k, "x", 12); got != "x=10" || store.KeyCalls() != 1 || !k.Status().StoreUp {
				t.Fatalf("store back: %s after %d calls", got, store.KeyCalls())
			}
		})
	}
}

func TestKeyLimiterEpochSummaries(t *testing.T) {
	clk := clock.NewManual(epochStart)
	var mu sync.Mutex
	var got []ratelimit.KeyEpochSummary
	k := newKeyLimiter(t, ratelimit.KeyConfig{Max: 5}, ratelimit.WithClock(clk),
		ratelimit.WithKeyEpochObserver(2, func(s ratelimit.KeyEpochSummary) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, s)
		}))
	take(t, k, "a", 1, "b", 4, "c", 4)
	take(t, k, "a", 1)
	clk.Advance(time.Second)
	take(t, k, "a", 9)
	clk.Advance(400 * time.Millisecond) // half a second after the first epoch: not yet
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d summaries before the first epoch's delay", n)
	}
	clk.Advance(200 * time.Millisecond)
	k.Close() // hands over the second epoch
	want := fmt.Sprintf("[{%d 10 3 [{b 4} {c 4}]} {%d 5 1 [{a 5}]}]", epochStart.Unix(), epochStart.Unix()+1)
	if fmt.Sprint(got) != want {
		t.Fatalf("summaries %v; want %v", got, want)
	}
	if _, err := k.TryAcquire(context.Background(), nil, nil); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("Take after Close: %v", err)
	}
}

func TestKeyModeKeyOf(t *testing.T) {
	for _, tt := range []struct {
		mode ratelimit.KeyMode
		keys []string
		want string
		ok   bool
	}{
		{ratelimit.FirstKey, nil, "", false},
		{ratelimit.FirstKey, []string{"a", "b"}, "a", true},
		{ratelimit.AllKeys, []string{"a"}, "a", true},
		{ratelimit.AllKeys, []string{"a", "b,c"}, `"a","b,c"`, true},
	} {
		if got, ok := tt.mode.KeyOf(tt.keys); got != tt.want || ok != tt.ok {
			t.Errorf("%v.KeyOf(%q) = %q, %v; want %q, %v", tt.mode, tt.keys, got, ok, tt.want, tt.ok)
		}
	}
	var m ratelimit.KeyMode
	if err := m.UnmarshalText([]byte("some")); err == nil || err.Error() != `unknown perKey.keys "some" (want first or all)` {
		t.Fatalf("UnmarshalText(some): %v", err)
	}
}
