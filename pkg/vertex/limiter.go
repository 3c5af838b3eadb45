package vertex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
	"github.com/sluiceflow/sluice/pkg/secret"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// buildLimiter makes the vertex's rate limiter, if it has a rate limit, and
// registers its gauges with reg.
func (v *Vertex) buildLimiter(reg prometheus.Registerer) error {
	rl := v.spec.Limits.GetRateLimit()
	if rl == nil {
		return nil
	}
	opts, err := v.limiterOptions(rl)
	if err != nil {
		return err
	}
	l, err := ratelimit.New(vertexconfig.LimiterConfig(rl), opts...)
	if err != nil {
		return err
	}
	v.limiter = l
	v.onClose(func() error { return l.Close(context.Background()) })
	observe.RegisterLimiter(reg, l.Status)
	return v.buildKeyLimiter(reg, rl)
}

// UpdateRateLimit changes the vertex's rate limit to rl while it runs: the
// settings [ratelimit.Fields] marks live (see [ratelimit.Limiter.Update]).
// With a shared store every replica switches at the same epoch. rl must come
// from a validated config that differs from the running one in those fields
// only ([vertexconfig.LiveChange]); a vertex without a rate limit cannot get
// one live.
func (v *Vertex) UpdateRateLimit(rl *config.RateLimit) error {
	if v.limiter == nil || rl == nil {
		return fmt.Errorf("vertex %s: a rate limit cannot be added or removed while the vertex runs", v.spec.Name)
	}
	if err := v.limiter.Update(vertexconfig.LimiterConfig(rl)); err != nil {
		return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
	}
	return nil
}

// limiterOptions returns the rate limiter's options for the vertex's store:
// none for the in-memory store, a fixed pool for replicaCountStore, and a
// Redis pool for redisStore.
func (v *Vertex) limiterOptions(rl *config.RateLimit) ([]ratelimit.Option, error) {
	host, _ := os.Hostname()
	log := v.log
	opts := []ratelimit.Option{
		ratelimit.WithReplicaID(fmt.Sprintf("%s-%d-%s-%d", v.spec.StoreKey, v.o.replica, host, os.Getpid())),
		ratelimit.WithLogger(log.Named("ratelimit")),
		ratelimit.WithClock(v.o.clock),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			fields := []zap.Field{zap.Int64("epoch", s.Epoch), zap.Float64("pool", float64(s.PoolMilli)/1000),
				zap.Int64("share", s.Share), zap.Int64("granted", s.Granted), zap.Int("poolSize", s.PoolSize),
				zap.Int("rank", s.Rank), zap.Bool("eligible", s.Eligible), zap.Int64("max", s.Max)}
			if s.Switched {
				fields = append(fields, zap.Bool("switched", true))
			}
			if s.Shadow {
				// What the readers took: granted, and beyond it in shadow.
				fields = append(fields, zap.Int64("shadowThrottled", s.ShadowThrottled),
					zap.Int64("read", s.Granted+s.ShadowThrottled))
			}
			log.Debug("epoch", fields...)
		}),
	}
	if rl.SyncInterval != nil {
		opts = append(opts, ratelimit.WithSyncInterval(rl.SyncInterval.Duration))
	}
	switch s := rl.Store; {
	case s == nil:
	case s.ReplicaCountStore != nil:
		n, err := v.replicaCount(s.ReplicaCountStore)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ratelimit.WithFixedPool(n, v.o.replica))
	case s.RedisStore != nil:
		store, err := v.openRedisStore(rl)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ratelimit.WithStore(store))
		v.keyStore = store // per-key counts too, with rateLimit.perKey
	}
	return opts, nil
}

// replicaCount returns replicaCountStore.replicas, or $NUMAFLOW_REPLICAS, which
// this replica's index must be below.
func (v *Vertex) replicaCount(s *config.ReplicaCountStore) (int, error) {
	path := v.spec.RateLimitPath + ".store.replicaCountStore.replicas"
	n := 0
	if s.Replicas != nil {
		n = int(*s.Replicas)
	} else {
		env := os.Getenv("NUMAFLOW_REPLICAS")
		if env == "" {
			return 0, &config.FieldError{Path: path, Err: errors.New("is not set and neither is NUMAFLOW_REPLICAS")}
		}
		var err error
		if n, err = strconv.Atoi(env); err != nil || n < 1 {
			return 0, &config.FieldError{Path: path, Err: fmt.Errorf("is not set and NUMAFLOW_REPLICAS (%q) is not a whole number, 1 or more", env)}
		}
	}
	if v.o.replica >= n {
		return 0, fmt.Errorf("%w: %d is not below the %d replicas of %s", ErrReplica, v.o.replica, n, path)
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

// openRedisStore connects to the Redis of a redisStore and returns the
// vertex's pool in it. A configuration Redis rejects (credentials, TLS,
// unknown host) is a [*config.FieldError] naming the field; Redis being away is
// not: the replica starts, takes no tokens, and retries.
func (v *Vertex) openRedisStore(rl *config.RateLimit) (*redisstore.Store, error) {
	setRedisLogger.Do(func() { redis.SetLogger(redisLog{v.log.Named("redis")}) })
	rs := rl.Store.RedisStore
	path := v.spec.RateLimitPath + ".store.redisStore"
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
	store, err := redisstore.Open(ctx, conn, v.spec.StoreKey, opts)
	if err != nil {
		if field := fields.of(err); field != "" {
			return nil, &config.FieldError{Path: field, Err: err}
		}
		return nil, err
	}
	v.onClose(store.Close)
	v.log.Info("sharing the rate limit through redis", zap.Stringer("mode", rs.Mode), zap.Strings("keys", store.Keys()))
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
		if conn.Username, conn.Password, err = secret.Auth(s.RedisAuth, sp+".redisAuth"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.SentinelUsername, conn.SentinelPassword, err = secret.Auth(s.SentinelAuth, sp+".sentinelAuth"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.TLS, err = secret.TLS(s.RedisTLS, sp+".redisTLS"); err != nil {
			return conn, redisFields{}, err
		}
		if conn.SentinelTLS, err = secret.TLS(s.SentinelTLS, sp+".sentinelTLS"); err != nil {
			return conn, redisFields{}, err
		}
		return conn, redisFields{store: path, creds: sp + ".redisAuth", tls: sp + ".redisTLS", host: sp + ".endpoints"}, nil
	}
	conn.URL = *rs.URL
	f := redisFields{store: path, creds: path + ".url", tls: path + ".url", host: path + ".url"}
	if conn.Username, conn.Password, err = secret.Auth(rs.RedisAuth, path+".redisAuth"); err != nil {
		return conn, f, err
	}
	if conn.TLS, err = secret.TLS(rs.RedisTLS, path+".redisTLS"); err != nil {
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
