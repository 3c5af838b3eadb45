package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/ratelimit/memstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// TestStoreThatLostWritesHolds: a replica whose deadline, still ahead, the
// store no longer holds tells it that it lost writes; it then agrees on no
// size and lends nothing for a lease from then, and agrees again after.
// A deadline already past (a replica away past its lease) is no loss. Redis
// and the Go store behave alike.
func TestStoreThatLostWritesHolds(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rs := newStore(t, srv, "mv", redisstore.Options{})
	ms := memstore.New(nil)
	for _, st := range []struct {
		name  string
		store share.Store
		flush func()
	}{
		{"redis", rs, func() { srv.Do(t, "FLUSHALL") }},
		{"go", ms, ms.Flush},
	} {
		t.Run(st.name, func(t *testing.T) { testLostWrites(t, st.store, st.flush) })
	}
}

func testLostWrites(t *testing.T, s share.Store, flush func()) {
	const lease = 400 * time.Millisecond
	ctx := context.Background()
	until := map[string]time.Time{}
	sync := func(id string, size int, lend *share.Lend) share.View {
		t.Helper()
		v, err := s.Sync(ctx, share.Report{ID: id, Replicas: size, StaleAfter: lease, LeaseUntil: until[id], Lend: lend})
		if err != nil {
			t.Fatal(err)
		}
		until[id] = v.Time.Add(lease)
		return v
	}
	sync("a", 0, nil)
	sync("b", 0, nil)
	sync("a", 2, nil)
	if v := sync("b", 2, nil); !v.Agreed || v.Replicas != 2 || !v.Held.IsZero() {
		t.Fatalf("before the loss: %+v; want AGREE(2), no hold", v)
	}
	flush()
	v := sync("a", 2, nil)
	if d := v.Held.Sub(v.Time); v.Agreed || v.Live != 1 || d <= lease-time.Millisecond || d > lease {
		t.Fatalf("after the loss: %+v; want DISAGREE, live 1, held a lease (%v, to the ms) from the store's time", v, lease)
	}
	held := v.Held
	epoch := v.Time.Unix()
	lend := func(give, want int64) *share.Lend { return &share.Lend{Epoch: epoch, Give: give, Want: want} }
	if v := sync("a", 1, lend(10, 0)); v.Agreed || !v.Held.Equal(held) {
		t.Fatalf("alone in the hold: %+v; want DISAGREE, held until %v", v, held)
	}
	if v := sync("a", 1, lend(0, 10)); v.Lent != 0 {
		t.Fatalf("lent %d in the hold; want none", v.Lent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := sync("a", 1, nil)
		if v.Agreed && v.Replicas == 1 && v.Held.IsZero() {
			if v.Time.Before(held) {
				t.Fatalf("agreed at %v, before the hold's end %v", v.Time, held)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%+v: never agreed after the hold", v)
		}
		time.Sleep(50 * time.Millisecond) // the store's clock must pass the hold
	}
	// b was away past its lease: the store dropped it, and that is no loss.
	if v := sync("b", 2, nil); !v.Held.IsZero() {
		t.Fatalf("a replica back after its lease: %+v; want no hold", v)
	}
}
