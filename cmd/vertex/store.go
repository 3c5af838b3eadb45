package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// storePath is where a vertex's rateLimit store sits in its YAML.
const storePath = "spec.limits.rateLimit.store"

// limiterOptions returns the rate limiter's options for a vertex's store: none
// for the in-memory store, a fixed pool for replicaCountStore, and a Redis pool
// for redisStore. prefix keys the vertex's state in the store. closers gets what
// must be closed after the limiter.
func limiterOptions(rl *config.RateLimit, prefix string, replica int, log *zap.Logger, closers *[]func() error) ([]ratelimit.Option, error) {
	host, _ := os.Hostname()
	opts := []ratelimit.Option{
		ratelimit.WithReplicaID(fmt.Sprintf("%s-%d-%s-%d", prefix, replica, host, os.Getpid())),
		ratelimit.WithLogger(log.Named("ratelimit")),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			log.Debug("epoch", zap.Int64("epoch", s.Epoch), zap.Float64("pool", float64(s.PoolMilli)/1000),
				zap.Int64("share", s.Share), zap.Int64("granted", s.Granted), zap.Int("poolSize", s.PoolSize),
				zap.Int("rank", s.Rank), zap.Bool("eligible", s.Eligible))
		}),
	}
	if rl.SyncInterval != nil {
		opts = append(opts, ratelimit.WithSyncInterval(rl.SyncInterval.Duration))
	}
	if rl.Store == nil {
		return opts, nil
	}
	switch {
	case rl.Store.ReplicaCountStore != nil:
		n, err := replicaCount(rl.Store.ReplicaCountStore)
		if err != nil {
			return nil, err
		}
		if replica >= n {
			return nil, usagef("--replica (%d) must be below the %d replicas of %s.replicaCountStore", replica, n, storePath)
		}
		return append(opts, ratelimit.WithFixedPool(n, replica)), nil
	case rl.Store.RedisStore != nil:
		store, closeClient, err := newRedisStore(rl, prefix, log)
		if err != nil {
			return nil, err
		}
		*closers = append(*closers, closeClient)
		return append(opts, ratelimit.WithStore(store)), nil
	}
	return opts, nil
}

// replicaCount returns replicaCountStore.replicas, or $NUMAFLOW_REPLICAS.
func replicaCount(s *config.ReplicaCountStore) (int, error) {
	if s.Replicas != nil {
		return int(*s.Replicas), nil
	}
	v := os.Getenv("NUMAFLOW_REPLICAS")
	if v == "" {
		return 0, usagef("%s.replicaCountStore.replicas is not set and neither is NUMAFLOW_REPLICAS", storePath)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, usagef("NUMAFLOW_REPLICAS (%q) must be a whole number, 1 or more", v)
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

// newRedisStore connects to the Redis of a redisStore and returns the vertex's
// pool in it. A configuration Redis rejects (credentials, TLS, unknown host) is a
// usage error naming the field; Redis being away is not: the replica starts,
// takes no tokens, and retries.
func newRedisStore(rl *config.RateLimit, prefix string, log *zap.Logger) (*redisstore.Store, func() error, error) {
	setRedisLogger.Do(func() { redis.SetLogger(redisLog{log.Named("redis")}) })
	rs := rl.Store.RedisStore
	path := storePath + ".redisStore"
	var conn redisstore.Conn
	if rs.DB != nil {
		db := int(*rs.DB)
		conn.DB = &db
	}
	credsPath, tlsPath := path+".url", path+".url"
	switch rs.Mode {
	case "single":
		conn.URL = *rs.URL
		var err error
		if conn.Username, conn.Password, err = readAuth(rs.RedisAuth, path+".redisAuth"); err != nil {
			return nil, nil, err
		}
		if conn.TLS, err = readTLS(rs.RedisTLS, path+".redisTLS"); err != nil {
			return nil, nil, err
		}
		if rs.RedisAuth != nil {
			credsPath = path + ".redisAuth"
		}
		if rs.RedisTLS != nil {
			tlsPath = path + ".redisTLS"
		}
	case "sentinel":
		s := rs.Sentinel
		conn.MasterName, conn.Endpoints = s.MasterName, s.Endpoints
		var err error
		if conn.Username, conn.Password, err = readAuth(s.RedisAuth, path+".sentinel.redisAuth"); err != nil {
			return nil, nil, err
		}
		if conn.SentinelUsername, conn.SentinelPassword, err = readAuth(s.SentinelAuth, path+".sentinel.sentinelAuth"); err != nil {
			return nil, nil, err
		}
		if conn.TLS, err = readTLS(s.RedisTLS, path+".sentinel.redisTLS"); err != nil {
			return nil, nil, err
		}
		if conn.SentinelTLS, err = readTLS(s.SentinelTLS, path+".sentinel.sentinelTLS"); err != nil {
			return nil, nil, err
		}
		credsPath, tlsPath = path+".sentinel.redisAuth", path+".sentinel.redisTLS"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	opts := redisstore.Options{TTL: durationOr(rl.TTL, config.DefaultTTL)}
	store, err := redisstore.Open(ctx, conn, prefix, opts)
	if err != nil {
		var field string
		switch {
		case errors.Is(err, redisstore.ErrInvalidConn):
			field = path
		case errors.Is(err, redisstore.ErrAuth):
			field = credsPath
		case errors.Is(err, redisstore.ErrTLS):
			field = tlsPath
		case errors.Is(err, redisstore.ErrHost):
			field = path + ".url"
			if rs.Mode == "sentinel" {
				field = path + ".sentinel.endpoints"
			}
		default:
			return nil, nil, err
		}
		return nil, nil, usagef("%s: %v", field, err)
	}
	log.Info("sharing the rate limit through redis", zap.String("mode", rs.Mode), zap.Strings("keys", store.Keys()))
	return store, store.Close, nil
}

func durationOr(d *config.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// readAuth reads a username and a password from their secrets.
func readAuth(a *config.RedisAuth, path string) (user, password string, err error) {
	if a == nil {
		return "", "", nil
	}
	if a.Username != nil {
		if user, err = readSecretField(a.Username, path+".username"); err != nil {
			return "", "", err
		}
	}
	if a.Password != nil {
		if password, err = readSecretField(a.Password, path+".password"); err != nil {
			return "", "", err
		}
	}
	return user, password, nil
}

// readTLS builds a TLS configuration from its secrets' files.
func readTLS(t *config.TLS, path string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	var files redisstore.TLSFiles
	files.InsecureSkipVerify = t.InsecureSkipVerify
	for _, f := range []struct {
		sel  *config.SecretKeySelector
		name string
		dst  *string
	}{{t.CACertSecret, "caCertSecret", &files.CAFile}, {t.CertSecret, "certSecret", &files.CertFile}, {t.KeySecret, "keySecret", &files.KeyFile}} {
		if f.sel != nil {
			*f.dst = secretPath(f.sel)
		}
	}
	c, err := files.Config()
	if err != nil {
		return nil, usagef("%s: %v", path, err)
	}
	return c, nil
}

// readSecretField reads a secret; a secret that cannot be read is a usage error
// naming its field. The secret's value is never part of the message.
func readSecretField(s *config.SecretKeySelector, path string) (string, error) {
	v, err := readSecret(s)
	if err != nil {
		if s.Optional != nil && *s.Optional && errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", usagef("%s: %v", path, err)
	}
	return v, nil
}
