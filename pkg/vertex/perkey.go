package vertex

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// keyLogTop is how many keys an epoch's log line names, the most granted first.
const keyLogTop = 32

// buildKeyLimiter makes the per-key limiter of the rate limit, if any,
// beside the vertex's limiter, and registers its metrics with reg. With a
// store that counts keys (Redis) the keys are counted there, under the
// vertex's key prefix; while it cannot be reached, OnStoreFailure applies
// (pause: keyed messages wait; lastKnown: each key gets this replica's share
// of the per-key max, counted here). With a fixed count of replicas each
// replica counts its share here; alone the replica counts the whole max.
func (v *Vertex) buildKeyLimiter(reg prometheus.Registerer, rl *RateLimit, store Store) error {
	if rl.PerKey == nil {
		return nil
	}
	log := v.log.Named("perkey")
	metrics := throttle.NewKeyMetrics(reg)
	opts := []ratelimit.Option{
		ratelimit.WithClock(v.o.clock),
		ratelimit.WithLogger(log),
		ratelimit.WithKeyEpochObserver(keyLogTop, func(s ratelimit.KeyEpochSummary) {
			v.observeKeys(s)
			log.Debug("perKey epoch", zap.Int64("epoch", s.Epoch), zap.Int64("granted", s.Granted),
				zap.Int("keys", s.Keys), zap.Object("top", keyCounts(s.Top)), zap.Int64("held", metrics.Held()))
		}),
	}
	switch l, ks := v.limiter, keyStore(store); {
	case ks != nil:
		opts = append(opts, ratelimit.WithKeyStore(ks), ratelimit.WithKeyShare(func() (int, int) {
			s := l.Status()
			return s.Replicas, s.Rank
		}))
	case store.Shared == nil && store.Replicas > 0:
		s := l.Status() // a fixed replica set: its count and rank never change
		opts = append(opts, ratelimit.WithKeyShare(func() (int, int) { return s.Replicas, s.Rank }))
	}
	k, err := ratelimit.NewKeyLimiter(rl.PerKey.Config, opts...)
	if err != nil {
		return err
	}
	v.keys, v.keyMetrics = k, metrics
	v.onClose(k.Close)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_ratelimit_keys_tracked",
			Help: "Keys the per-key limit tracks now in this replica (rateLimit.perKey)."},
			func() float64 { return float64(k.Status().Keys) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_ratelimit_key_evictions_total",
			Help: "Keys the per-key limit forgot, least recently used first, to track at most maxKeys."},
			func() float64 { return float64(k.Status().Evictions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_ratelimit_key_granted_total",
			Help: "Per-key tokens granted to this replica, one per keyed message let through (rateLimit.perKey)."},
			func() float64 { return float64(k.Status().Granted) }),
	)
	return nil
}

// perKey returns the per-key limit of a forwarder, or nil.
func (v *Vertex) perKey() *throttle.PerKey {
	if v.keys == nil {
		return nil
	}
	pk := v.spec.Limits.RateLimit.PerKey
	return &throttle.PerKey{Limiter: v.keys, Mode: pk.Keys, MaxHeld: pk.MaxHeld, Metrics: v.keyMetrics}
}

// KeyStatus is the per-key limit of a replica, in /status.
type KeyStatus struct {
	// Max is the most messages per key per second, all replicas together,
	// and Keys which keys count (first or all).
	Max  int64  `json:"max"`
	Keys string `json:"keys"`
	// Held is the messages held now for their key's limit, and HeldTotal
	// those held so far.
	Held      int64 `json:"held"`
	HeldTotal int64 `json:"heldTotal"`
	// Tracked is the keys tracked now, Evictions those forgotten so far,
	// and Granted the per-key tokens granted so far.
	Tracked   int   `json:"keysTracked"`
	Evictions int64 `json:"evictions"`
	Granted   int64 `json:"granted"`
	// StoreUp reports whether the last call to the store succeeded (true
	// without one).
	StoreUp bool `json:"storeUp"`
}

// keyStatus returns the per-key limit's status, or nil without one.
func (v *Vertex) keyStatus() *KeyStatus {
	if v.keys == nil {
		return nil
	}
	ks := v.keys.Status()
	pk := v.spec.Limits.RateLimit.PerKey
	return &KeyStatus{Max: v.keys.Max(), Keys: pk.Keys.String(), Held: v.keyMetrics.Held(),
		HeldTotal: int64(counterValue(v.keyMetrics.HeldTotal)), Tracked: ks.Keys, Evictions: ks.Evictions,
		Granted: ks.Granted, StoreUp: ks.StoreUp}
}

// keyCounts logs keys and their counts as one object, in order.
type keyCounts []ratelimit.KeyCount

func (kc keyCounts) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, c := range kc {
		enc.AddInt64(c.Key, c.Tokens)
	}
	return nil
}
