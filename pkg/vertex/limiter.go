package vertex

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/bits"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// buildLimiter makes the vertex's rate limiter, if it has a rate limit, and
// registers its gauges with reg.
func (v *Vertex) buildLimiter(reg prometheus.Registerer) error {
	rl := v.spec.Limits.RateLimit
	if rl == nil {
		return nil
	}
	cfg, err := v.regionConfig(rl.Config)
	if err != nil {
		return err
	}
	opts, store, err := v.limiterOptions(rl)
	if err != nil {
		return err
	}
	l, err := ratelimit.New(cfg, opts...)
	if err != nil {
		return err
	}
	v.limiter = l
	v.onClose(func() error { return l.Close(context.Background()) })
	observe.RegisterLimiter(reg, l.Status)
	if err := v.buildByteLimiter(reg, rl, store); err != nil {
		return err
	}
	if err := v.buildGroups(reg, rl); err != nil {
		return err
	}
	return v.buildKeyLimiter(reg, rl, store)
}

// region returns the replica's region when the rate limit has regions, or
// "".
func (v *Vertex) region() string {
	if rl := v.spec.Limits.RateLimit; rl == nil || rl.Regions == nil {
		return ""
	}
	return v.o.region
}

// regionConfig returns cfg with the replica's region's part of its max and
// min, when the limit has regions; cfg itself otherwise.
func (v *Vertex) regionConfig(cfg ratelimit.Config) (ratelimit.Config, error) {
	rg := v.spec.Limits.RateLimit.Regions
	if rg == nil {
		return cfg, nil
	}
	names := slices.Sorted(maps.Keys(rg.Proportions))
	r := v.o.region
	switch {
	case r == "":
		return cfg, fmt.Errorf("vertex %s: %w: none is given, and its rate limit has regions (%s): give the replica's with --region or SLUICE_REGION",
			v.spec.Name, ErrRegion, strings.Join(names, ", "))
	case rg.Proportions[r] <= 0:
		return cfg, fmt.Errorf("vertex %s: %w: %q is not one of the rate limit's regions (%s)", v.spec.Name, ErrRegion, r, strings.Join(names, ", "))
	}
	cfg.Max = RegionShare(cfg.Max, rg.Proportions, r)
	cfg.Min = min(RegionShare(cfg.Min, rg.Proportions, r), cfg.Max)
	cfg.Lend, cfg.ReservePercentage = true, rg.ReservePercentage
	return cfg, nil
}

// UpdateRateLimit changes the vertex's rate limit to cfg while it runs: the
// settings [ratelimit.Fields] marks live (see [ratelimit.Limiter.Update]).
// With a shared store every replica switches at the same epoch. A vertex
// without a rate limit cannot get one live, nor lose its own (cfg nil).
func (v *Vertex) UpdateRateLimit(cfg *ratelimit.Config) error {
	if v.limiter == nil || cfg == nil {
		return fmt.Errorf("vertex %s: a rate limit cannot be added or removed while the vertex runs", v.spec.Name)
	}
	c, err := v.regionConfig(*cfg)
	if err != nil {
		return err
	}
	if err := v.limiter.Update(c); err != nil {
		return fmt.Errorf("vertex %s: %w", v.spec.Name, err)
	}
	return nil
}

// limiterOptions opens the rate limit's store and returns the rate limiter's
// options for it: none for the replica alone, a fixed replica set for a count of
// replicas, the store for a store.
func (v *Vertex) limiterOptions(rl *RateLimit) ([]ratelimit.Option, Store, error) {
	host, _ := os.Hostname()
	log := v.log
	opts := []ratelimit.Option{
		ratelimit.WithReplicaID(fmt.Sprintf("%s-%d-%s-%d", v.spec.StoreKey, v.o.replica, host, os.Getpid())),
		ratelimit.WithLogger(log.Named("ratelimit")),
		ratelimit.WithClock(v.o.clock),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			v.page.history.Observe(s)
			fields := []zap.Field{zap.Int64("epoch", s.Epoch), zap.Float64("pool", float64(s.PoolMilli)/1000),
				zap.Int64("share", s.Share), zap.Int64("granted", s.Granted), zap.Int("poolSize", s.Replicas),
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
	opts = append(opts, ratelimit.WithSyncInterval(syncInterval(rl)))
	if r := v.region(); r != "" {
		opts = append(opts, ratelimit.WithRegion(r))
	}
	if rl.Store == nil {
		return opts, Store{}, nil
	}
	s, err := rl.Store(v.env())
	if err != nil {
		return nil, Store{}, err
	}
	switch {
	case s.Shared != nil:
		opts = append(opts, ratelimit.WithStore(s.Shared))
		v.page.shared = true
	case s.Replicas > 0:
		if v.o.replica >= s.Replicas {
			return nil, Store{}, fmt.Errorf("%w: %d is not below the %d replicas of the rate limit's store", ErrReplica, v.o.replica, s.Replicas)
		}
		opts = append(opts, ratelimit.WithFixedReplicas(s.Replicas, v.o.replica))
	}
	return opts, s, nil
}

// keyStore returns the store of s that counts per-key limits, or nil.
func keyStore(s Store) share.KeyStore {
	ks, _ := s.Shared.(share.KeyStore)
	return ks
}

// RegionShare returns region's part of total split by weights:
// floor(total*w/W) for weight w of the sum W, plus one for each of the
// regions with the largest remainders (the first by name among equals)
// while the floors fall short of total, so that the parts sum to total. A
// region without a weight gets 0.
func RegionShare(total int64, weights map[string]int, region string) int64 {
	w, ok := weights[region]
	if !ok || w <= 0 || total <= 0 {
		return 0
	}
	sum := uint64(0)
	for _, x := range weights {
		sum += uint64(max(x, 0))
	}
	type part struct {
		name   string
		q, rem uint64
	}
	parts := make([]part, 0, len(weights))
	short := uint64(total)
	for _, n := range slices.Sorted(maps.Keys(weights)) {
		hi, lo := bits.Mul64(uint64(total), uint64(max(weights[n], 0)))
		q, rem := bits.Div64(hi, lo, sum)
		parts = append(parts, part{n, q, rem})
		short -= q
	}
	slices.SortStableFunc(parts, func(a, b part) int { return cmp.Compare(b.rem, a.rem) })
	for i, p := range parts {
		if p.name == region {
			if uint64(i) < short {
				return int64(p.q) + 1
			}
			return int64(p.q)
		}
	}
	return 0
}
