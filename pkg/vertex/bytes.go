package vertex

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/observe"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// ByteStatus is the byte limit (rateLimit.bytes) in /status: its pool of
// bytes and this replica's share of it in the current epoch.
type ByteStatus struct {
	Max     int64   `json:"max"`
	Pool    float64 `json:"pool"`
	Share   int64   `json:"share"`
	Granted int64   `json:"grantedThisEpoch"`
	// ShadowThrottled, while rateLimit.shadow is on, is the bytes the limit
	// would have throttled so far and let through.
	ShadowThrottled *int64 `json:"shadowThrottled,omitempty"`
}

// buildByteLimiter makes the vertex's byte limiter, if its rate limit has
// one, sharing through store's byte limit (or its fixed replica count), and registers
// its gauges with reg.
func (v *Vertex) buildByteLimiter(reg prometheus.Registerer, rl *RateLimit, store Store) error {
	if rl.Bytes == nil {
		return nil
	}
	host, _ := os.Hostname()
	log := v.log.Named("ratelimit.bytes")
	hist := observe.NewHistory(observe.DefaultHistory, nil)
	opts := []ratelimit.Option{
		ratelimit.WithReplicaID(fmt.Sprintf("%s-%d-%s-%d", v.spec.StoreKey, v.o.replica, host, os.Getpid())),
		ratelimit.WithLogger(log),
		ratelimit.WithClock(v.o.clock),
		ratelimit.WithEpochObserver(func(s ratelimit.EpochSummary) {
			hist.Observe(s)
			log.Debug("epoch", zap.Int64("epoch", s.Epoch), zap.Float64("pool", float64(s.PoolMilli)/1000),
				zap.Int64("share", s.Share), zap.Int64("granted", s.Granted), zap.Int("poolSize", s.Replicas),
				zap.Int("rank", s.Rank), zap.Bool("eligible", s.Eligible), zap.Int64("max", s.Max),
				zap.Int64("shadowThrottled", s.ShadowThrottled))
		}),
	}
	opts = append(opts, ratelimit.WithSyncInterval(syncInterval(rl)))
	if r := v.region(); r != "" {
		opts = append(opts, ratelimit.WithRegion(r))
	}
	cfg, err := v.regionConfig(*rl.Bytes)
	if err != nil {
		return err
	}
	switch {
	case store.Bytes != nil:
		opts = append(opts, ratelimit.WithStore(store.Bytes))
	case store.Shared != nil:
		return fmt.Errorf("vertex %s: the rate limit's store has none for the byte limit", v.spec.Name)
	case store.Replicas > 0:
		opts = append(opts, ratelimit.WithFixedReplicas(store.Replicas, v.o.replica))
	}
	l, err := ratelimit.New(cfg, opts...)
	if err != nil {
		return fmt.Errorf("vertex %s: byte limit: %w", v.spec.Name, err)
	}
	v.bytes, v.page.bytes = l, hist
	v.onClose(func() error { return l.Close(context.Background()) })
	observe.RegisterByteLimiter(reg, l.Status)
	return nil
}

// UpdateByteLimit changes the vertex's byte limit (rateLimit.bytes) to cfg
// while it runs, as [Vertex.UpdateRateLimit] does the message limit. A
// vertex without a byte limit cannot get one live, nor lose its own (cfg
// nil); without either, it does nothing.
func (v *Vertex) UpdateByteLimit(cfg *ratelimit.Config) error {
	switch {
	case v.bytes == nil && cfg == nil:
		return nil
	case v.bytes == nil || cfg == nil:
		return fmt.Errorf("vertex %s: a byte limit cannot be added or removed while the vertex runs", v.spec.Name)
	}
	c, err := v.regionConfig(*cfg)
	if err != nil {
		return err
	}
	if err := v.bytes.Update(c); err != nil {
		return fmt.Errorf("vertex %s: byte limit: %w", v.spec.Name, err)
	}
	return nil
}

// byteStatus returns the byte limit's status, or nil without one.
func (v *Vertex) byteStatus() *ByteStatus {
	if v.bytes == nil {
		return nil
	}
	ls := v.bytes.Status()
	s := &ByteStatus{Max: ls.Max, Pool: ls.Pool(), Share: ls.Share, Granted: ls.Granted}
	if ls.Shadow {
		s.ShadowThrottled = &ls.ShadowThrottled
	}
	return s
}
