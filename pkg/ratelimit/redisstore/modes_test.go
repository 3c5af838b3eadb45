package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// deployment is a Redis a test runs on: one server, or a Redis Cluster of
// three masters.
type deployment struct {
	client redis.UniversalClient
	// do runs one command (in a cluster, on the node of its key) and returns
	// its reply, nil for a nil reply; any other error fails the test.
	do func(t testing.TB, args ...any) any
}

// storeModes are the Redis deployments the exactness tests run on.
var storeModes = []struct {
	name  string
	start func(t *testing.T) deployment
}{
	{"single", func(t *testing.T) deployment {
		srv := redistest.Start(t, redistest.Options{})
		return deployment{client: srv.Client(t), do: srv.Do}
	}},
	{"cluster", func(t *testing.T) deployment {
		c := redistest.StartCluster(t, redistest.Options{})
		client := c.Client(t)
		return deployment{client: client, do: func(t testing.TB, args ...any) any {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v, err := client.Do(ctx, args...).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("cluster %v: %v", args, err)
			}
			return v
		}}
	}},
}

// forEachMode runs test as a subtest on each of storeModes.
func forEachMode(t *testing.T, test func(t *testing.T, d deployment)) {
	for _, m := range storeModes {
		t.Run(m.name, func(t *testing.T) { test(t, m.start(t)) })
	}
}

// store returns the pool of the vertex prefix on d's client.
func (d deployment) store(t *testing.T, prefix string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(d.client, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eachServer calls fn on the one server, or on every master of a cluster,
// one at a time.
func (d deployment) eachServer(ctx context.Context, fn func(*redis.Client) error) error {
	cc, ok := d.client.(*redis.ClusterClient)
	if !ok {
		return fn(d.client.(*redis.Client))
	}
	var mu sync.Mutex
	return cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return fn(c)
	})
}
