package vertex

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/pool"
)

// buildLimiter makes the vertex's rate limiter, if it has a rate limit, and
// registers its gauges with reg.
func (v *Vertex) buildLimiter(reg prometheus.Registerer) error {
	rl := v.spec.Limits.RateLimit
	if rl == nil {
		return nil
	}
	opts, store, err := v.limiterOptions(rl)
	if err != nil {
		return err
	}
	l, err := ratelimit.New(rl.Config, opts...)
	if err != nil {
		return err
	}
	v.limiter = l
	v.onClose(func() error { return l.Close(context.Background()) })
	observe.RegisterLimiter(reg, l.Status)
	return v.buildKeyLimiter(reg, rl, store)
}

// UpdateRateLimit changes the vertex's rate limit to cfg while it runs: the
// settings [ratelimit.Fields] marks live (see [ratelimit.Limiter.Update]).
// With a shared store every replica switches at the same epoch. A vertex
// without a rate limit cannot get one live, nor lose its own (cfg nil).
func (v *Vertex) UpdateRateLimit(cfg *ratelimit.Config) error {
	if v.limiter == nil || cfg == nil {
		return fmt.Errorf("vertex %s: a rate limit cannot be added or removed while the vertex runs", v.spec.Name)
	}
	if err := v.limiter.Update(*cfg); err != nil {
		return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
	}
	return nil
}

// limiterOptions opens the rate limit's store and returns the rate limiter's
// options for it: none for the replica alone, a fixed pool for a count of
// replicas, the store's pool for a store.
func (v *Vertex) limiterOptions(rl *RateLimit) ([]ratelimit.Option, Store, error) {
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
	if rl.SyncInterval > 0 {
		opts = append(opts, ratelimit.WithSyncInterval(rl.SyncInterval))
	}
	if rl.Store == nil {
		return opts, Store{}, nil
	}
	s, err := rl.Store(v.env())
	if err != nil {
		return nil, Store{}, err
	}
	switch {
	case s.Pool != nil:
		opts = append(opts, ratelimit.WithStore(s.Pool))
	case s.Replicas > 0:
		if v.o.replica >= s.Replicas {
			return nil, Store{}, fmt.Errorf("%w: %d is not below the %d replicas of the rate limit's store", ErrReplica, v.o.replica, s.Replicas)
		}
		opts = append(opts, ratelimit.WithFixedPool(s.Replicas, v.o.replica))
	}
	return opts, s, nil
}

// keyStore returns the store of s that counts per-key limits, or nil.
func keyStore(s Store) pool.KeyStore {
	ks, _ := s.Pool.(pool.KeyStore)
	return ks
}
