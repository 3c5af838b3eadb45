package vertexconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
	"github.com/sluiceflow/sluice/pkg/vertex"
)

// storeFunc returns the constructor of the store of the rateLimit block rl
// at path: nil for none or inMemoryStore (the replica alone), a fixed count
// for replicaCountStore, a Redis store for redisStore.
func storeFunc(rl *config.RateLimit, path string) vertex.StoreFunc {
	switch s := rl.Store; {
	case s == nil:
		return nil
	case s.ReplicaCountStore != nil:
		return func(env vertex.Env) (vertex.Store, error) {
			n, err := replicaCount(env, s.ReplicaCountStore, path+".store.replicaCountStore.replicas")
			return vertex.Store{Replicas: n}, err
		}
	case s.RedisStore != nil:
		return func(env vertex.Env) (vertex.Store, error) {
			store, err := openRedisStore(env, rl, path+".store.redisStore")
			if err != nil {
				return vertex.Store{}, err
			}
			s := vertex.Store{Shared: store}
			if rl.Bytes != nil {
				s.Bytes = store.Limit("bytes") // the byte limit's, in the same slot
			}
			return s, nil
		}
	}
	return nil
}

// replicaCount returns replicaCountStore.replicas, at path, or
// $NUMAFLOW_REPLICAS, which the replica's index must be below.
func replicaCount(env vertex.Env, s *config.ReplicaCountStore, path string) (int, error) {
	n := 0
	if s.Replicas != nil {
		n = int(*s.Replicas)
	} else {
		v := os.Getenv("NUMAFLOW_REPLICAS")
		if v == "" {
			return 0, &config.FieldError{Path: path, Err: errors.New("is not set and neither is NUMAFLOW_REPLICAS")}
		}
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return 0, &config.FieldError{Path: path, Err: fmt.Errorf("is not set and NUMAFLOW_REPLICAS (%q) is not a whole number, 1 or more", v)}
		}
	}
	if env.Replica >= n {
		return 0, fmt.Errorf("%w: %d is not below the %d replicas of %s", vertex.ErrReplica, env.Replica, n, path)
	}
	return n, nil
}

// redisLog routes go-redis's own log lines (dial failures while Redis is away)
// to the vertex's log at debug level: the limiter logs the state changes.
type redisLog struct{ log *zap.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) {
	r.log.Debug(fmt.Sprintf(format, v...))
}

var setRedisLogger sync.Once

// redisOpenTimeout bounds the first contact with Redis, which tells a
// configuration Redis rejects from Redis being away.
const redisOpenTimeout = 3 * time.Second

// openRedisStore connects to the Redis of the redisStore at path and returns
// the vertex's pool in it. A configuration Redis rejects (credentials, TLS,
// unknown host) is a [*config.FieldError] naming the field; Redis being away is
// not: the replica starts, takes no tokens, and retries.
func openRedisStore(env vertex.Env, rl *config.RateLimit, path string) (*redisstore.Store, error) {
	setRedisLogger.Do(func() { redis.SetLogger(redisLog{env.Log.Named("redis")}) })
	rs := rl.Store.RedisStore
	conn, fields, err := redisConn(rs, path)
	if err != nil {
		return nil, err
	}
	var opts redisstore.Options
	if rl.TTL != nil {
		opts.TTL = rl.TTL.Duration
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisOpenTimeout)
	defer cancel()
	store, err := redisstore.Open(ctx, conn, env.StoreKey, opts)
	if err != nil {
		if field := fields.of(err); field != "" {
			return nil, &config.FieldError{Path: field, Err: err}
		}
		return nil, err
	}
	env.OnClose(store.Close)
	env.Log.Info("sharing the rate limit through redis", zap.Stringer("mode", rs.Mode), zap.Strings("keys", store.Keys()))
	return store, nil
}

// redisFields are the fields of a redisStore that a refusal from Redis blames.
type redisFields struct{ store, creds, tls, host string }

// of returns the field err blames, or "" when it blames none.
func (f redisFields) of(err error) string {
	switch {
	case errors.Is(err, redisstore.ErrInvalidConn):
		return f.store
	case errors.Is(err, redisstore.ErrAuth):
		return f.creds
	case errors.Is(err, redisstore.ErrTLS):
		return f.tls
	case errors.Is(err, redisstore.ErrHost):
		return f.host
	}
	return ""
}

// redisConn reads how to reach the Redis of rs, named path in the YAML, with
// its secrets.
func redisConn(rs *config.RedisStore, path string) (redisstore.Conn, redisFields, error) {
	var conn redisstore.Conn
	if rs.DB != nil {
		db := int(*rs.DB)
		conn.DB = &db
	}
	var err error
	if rs.Mode == config.RedisModeSentinel {
		s := rs.Sentinel
		sp := path + ".sentinel"
		conn.MasterName, conn.Endpoints = s.MasterName, s.Endpoints
		if conn.Username, conn.Password, err = readAuth(s.RedisAuth, sp+".redisAuth"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.SentinelUsername, conn.SentinelPassword, err = readAuth(s.SentinelAuth, sp+".sentinelAuth"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.TLS, err = readTLS(s.RedisTLS, sp+".redisTLS"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.SentinelTLS, err = readTLS(s.SentinelTLS, sp+".sentinelTLS"); err != nil {
			return conn, redisFields{}, err
		}
		return conn, redisFields{store: path, creds: sp + ".redisAuth", tls: sp + ".redisTLS", host: sp + ".endpoints"}, nil
	}
	if rs.Mode == config.RedisModeCluster {
		conn.ClusterAddrs = rs.Cluster.Addrs
		f := redisFields{store: path, creds: path + ".redisAuth", tls: path + ".redisTLS", host: path + ".cluster.addrs"}
		if conn.Username, conn.Password, err = readAuth(rs.RedisAuth, path+".redisAuth"); err != nil {
			return conn, f, err
		}
		if conn.TLS, err = readTLS(rs.RedisTLS, path+".redisTLS"); err != nil {
			return conn, f, err
		}
		return conn, f, nil
	}
	conn.URL = *rs.URL
	f := redisFields{store: path, creds: path + ".url", tls: path + ".url", host: path + ".url"}
	if conn.Username, conn.Password, err = readAuth(rs.RedisAuth, path+".redisAuth"); err != nil {
		return conn, f, err
	}
	if conn.TLS, err = readTLS(rs.RedisTLS, path+".redisTLS"); err != nil {
		return conn, f, err
	}
	if rs.RedisAuth != nil {
		f.creds = path + ".redisAuth"
	}
	if rs.RedisTLS != nil {
		f.tls = path + ".redisTLS"
	}
	return conn, f, nil
}
