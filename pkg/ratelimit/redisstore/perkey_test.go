package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// commandCounter is a go-redis hook that counts the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestKeyLimitersShareThroughRedis runs three replicas' key limiters on one
// Redis: each batch of 40 keys is one EVALSHA, whatever the number of keys,
// and no key gets more than its max in an epoch over the three.
func TestKeyLimitersShareThroughRedis(t *testing.T) { forEachMode(t, testKeyLimitersShareThroughRedis) }

func testKeyLimitersShareThroughRedis(t *testing.T, d deployment) {
	var sent commandCounter
	d.client.AddHook(&sent)
	s := d.store(t, "mv", redisstore.Options{})
	const max, keys, batches = 25, 40, 30
	var limiters []*ratelimit.KeyLimiter
	for range 3 {
		k, err := ratelimit.NewKeyLimiter(ratelimit.KeyConfig{Max: max}, ratelimit.WithKeyStore(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		limiters = append(limiters, k)
	}
	ctx := context.Background()
	reqs := make([]ratelimit.KeyRequest, keys)
	for i := range reqs {
		reqs[i] = ratelimit.KeyRequest{Key: "key-" + strconv.Itoa(i), Want: 4}
	}
	granted := make([]int, keys)
	// Per epoch and key, what the replicas were granted together.
	sums := map[int64]map[string]int{}
	add := func(e int64) {
		if sums[e] == nil {
			sums[e] = map[string]int{}
		}
		for i, g := range granted {
			sums[e][reqs[i].Key] += g
		}
	}
	e, err := limiters[0].TryAcquire(ctx, reqs, granted) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	add(e)
	if err := d.eachServer(ctx, func(c *redis.Client) error { return c.ConfigResetStat(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	calls := int64(0)
	for b := range batches {
		before := sent.n.Load()
		e, err := limiters[b%3].TryAcquire(ctx, reqs, granted)
		if err != nil {
			t.Fatal(err)
		}
		n := sent.n.Load() - before
		if n > 1 {
			t.Fatalf("batch %d: %d commands; want at most one", b, n)
		}
		calls += n
		add(e)
	}
	// Over every server, or every master of a cluster.
	var evalsha, eval float64
	err = d.eachServer(ctx, func(c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		evalsha += infoFields(info, "cmdstat_evalsha")["calls"]
		eval += infoFields(info, "cmdstat_eval")["calls"]
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if total := evalsha + eval; total != float64(calls) {
		t.Fatalf("%v scripts run for %d calls", total, calls)
	}
	if evalsha != float64(calls) || calls == 0 {
		t.Fatalf("%v EVALSHA for %d batches of %d keys that made %d calls; want one EVALSHA per call, nothing else", evalsha, batches, keys, calls)
	}
	t.Logf("%d batches of %d keys: %d round trips (a batch whose keys all had none left makes none)", batches, keys, calls)
	for e, byKey := range sums {
		for key, n := range byKey {
			if n > max {
				t.Errorf("epoch %d: key %s granted %d; max %d", e, key, n, max)
			}
			if stored := d.do(t, "GET", s.KeyName(key)); stored != nil && strings.HasPrefix(stored.(string), fmt.Sprint(e, ":")) && stored != fmt.Sprint(e, ":", n) {
				t.Errorf("epoch %d: key %s granted %d, Redis counted %v", e, key, n, stored)
			}
		}
	}
}

// TestKeyCountsExpire: the counts of an epoch expire KeyLinger after it ends.
func TestKeyCountsExpire(t *testing.T) { forEachMode(t, testKeyCountsExpire) }

func testKeyCountsExpire(t *testing.T, d deployment) {
	s := d.store(t, "mv", redisstore.Options{})
	granted := make([]int, 2)
	at, err := s.TakeKeys(context.Background(), 3, []ratelimit.KeyRequest{{Key: "a", Want: 5}, {Key: "b", Want: 2}}, granted)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(granted) != "[3 2]" {
		t.Fatalf("granted %v; want [3 2]", granted)
	}
	count := s.KeyName("a")
	want := (at.Unix()+1)*1000 + redisstore.KeyLinger.Milliseconds()
	for _, key := range []string{count, s.KeyName("b")} {
		if got := d.do(t, "PEXPIRETIME", key); got != want {
			t.Fatalf("%s expires at %v ms; want %d, KeyLinger after the epoch", key, got, want)
		}
	}
	if got, want := d.do(t, "GET", count), fmt.Sprint(at.Unix(), ":3"); got != want {
		t.Fatalf("%s = %v; want %s", count, got, want)
	}
	if s.KeyPrefix() != "sluice:{mv}:perkey" {
		t.Fatalf("key prefix %q", s.KeyPrefix())
	}
	// A batch that asks for nothing more than the limit writes nothing.
	if _, err := s.TakeKeys(context.Background(), 3, []ratelimit.KeyRequest{{Key: "c", Want: 0}}, granted[:1]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.do(t, "EXISTS", count) != int64(0) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there", count)
		}
		time.Sleep(100 * time.Millisecond) // Redis's clock must pass the expiry
	}
}
