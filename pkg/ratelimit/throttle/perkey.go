package throttle

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// KeyLimiter is the part of a per-key limiter a forwarder uses
// (*ratelimit.KeyLimiter): TryAcquire grants tokens for the keys of a batch in one
// call, Epoch is the current epoch and WaitEpoch waits for a later one.
type KeyLimiter interface {
	TryAcquire(ctx context.Context, reqs []ratelimit.KeyRequest, granted []int) (int64, error)
	Epoch() (int64, time.Duration)
	WaitEpoch(ctx context.Context, e int64) error
	// Max is the tokens of a key per epoch.
	Max() int64
}

var _ KeyLimiter = (*ratelimit.KeyLimiter)(nil)

// PerKey is a forwarder's per-key limit: of what a forwarder read, the
// messages whose key has no tokens left in the epoch are held until it has.
type PerKey struct {
	Limiter KeyLimiter
	// Mode says which of a message's keys count.
	Mode ratelimit.KeyMode
	// MaxHeld is the most messages held at once (default DefaultMaxHeldBatches
	// read batches).
	MaxHeld int
	// Metrics are shared by the forwarders of a vertex; nil makes its own.
	Metrics *KeyMetrics
}

// DefaultMaxHeldBatches is the default hold, in read batches.
const DefaultMaxHeldBatches = 4

// KeyMetrics count the messages the forwarders of a vertex hold for their
// key's limit.
type KeyMetrics struct {
	// HeldTotal counts each message held, once.
	HeldTotal prometheus.Counter
	// HandedBackTotal counts the held messages handed back to the source
	// because the hold was full.
	HandedBackTotal prometheus.Counter
	held            atomic.Int64
}

// NewKeyMetrics creates the per-key metrics and registers them with reg (nil
// registers nothing): sluice_ratelimit_key_held_total,
// sluice_ratelimit_key_handed_back_total and the gauge
// sluice_ratelimit_key_held_messages.
func NewKeyMetrics(reg prometheus.Registerer) *KeyMetrics {
	m := &KeyMetrics{HeldTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_ratelimit_key_held_total",
		Help: "Messages held because their key had no tokens left in the second (rateLimit.perKey), once per message."}),
		HandedBackTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_ratelimit_key_handed_back_total",
			Help: "Held messages handed back to the source to deliver again later, because the hold was full (rateLimit.perKey)."})}
	if reg != nil {
		reg.MustRegister(m.HeldTotal, m.HandedBackTotal, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_ratelimit_key_held_messages",
			Help: "Messages held now for their key's limit (rateLimit.perKey)."}, func() float64 { return float64(m.Held()) }))
	}
	return m
}

// Held returns the messages held now.
func (m *KeyMetrics) Held() int64 { return m.held.Load() }

// AddHeld adds n, which may be negative, to the messages held now.
func (m *KeyMetrics) AddHeld(n int64) { m.held.Add(n) }
