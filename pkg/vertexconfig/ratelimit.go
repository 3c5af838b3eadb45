package vertexconfig

import (
	"math"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/expr"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// LimiterConfig returns the rate limiter's config for a rateLimit block, with
// Numaflow's defaults for what it leaves out. It does not validate: [Check]
// does.
func LimiterConfig(r *config.RateLimit) ratelimit.Config {
	cfg := ratelimit.DefaultConfig(0)
	if r.Max != nil {
		cfg.Max = clampInt64(*r.Max)
	}
	if r.Min != nil {
		cfg.Min = clampInt64(*r.Min)
	}
	if r.RampUpDuration != nil {
		cfg.RampUpDuration = r.RampUpDuration.Duration
	}
	if r.Pacing != nil {
		cfg.Pacing = r.Pacing.Duration
	}
	if r.StaleAfter != nil {
		cfg.StaleAfter = r.StaleAfter.Duration
	}
	cfg.OnStoreFailure = parse(r.OnStoreFailure, cfg.OnStoreFailure)
	if r.ResumedRampUp != nil {
		cfg.ResumedRampUp = *r.ResumedRampUp
	}
	cfg.Shadow = r.IsShadow()
	if a := r.Adaptive; a != nil {
		cfg.Adaptive = true
		if a.CutPercentage != nil {
			cfg.CutPercentage = clampInt(*a.CutPercentage)
		}
		if a.HoldBelowPercentage != nil {
			cfg.HoldBelowPercentage = clampInt(*a.HoldBelowPercentage)
		}
		if a.ProbeAfter != nil {
			cfg.ProbeAfter = a.ProbeAfter.Duration
		}
		if a.ForgetAfter != nil {
			cfg.ForgetAfter = a.ForgetAfter.Duration
		}
	}
	setMode(&cfg, r.Modes)
	if r.Regions != nil {
		cfg.Lend, cfg.ReservePercentage = true, reserve(r.Regions.ReservePercentage)
	}
	return cfg
}

// GroupConfig returns the limiter's config of a shared limit (a group):
// its max, min, ramp and mode, with the defaults of a rateLimit block, and
// lending on (see ratelimit.Config.Lend).
func GroupConfig(g *config.GroupLimit) ratelimit.Config {
	cfg := ratelimit.DefaultConfig(0)
	if g.Max != nil {
		cfg.Max = clampInt64(*g.Max)
	}
	if g.Min != nil {
		cfg.Min = clampInt64(*g.Min)
	}
	if g.RampUpDuration != nil {
		cfg.RampUpDuration = g.RampUpDuration.Duration
	}
	setMode(&cfg, g.Modes)
	cfg.Lend, cfg.ReservePercentage = true, reserve(g.ReservePercentage)
	return cfg
}

// reserve returns a reservePercentage or its default.
func reserve(p *uint32) int {
	if p == nil {
		return config.DefaultReservePercentage
	}
	return clampInt(*p)
}

// setMode sets cfg's mode and its parameters from a modes block.
func setMode(cfg *ratelimit.Config, m *config.Modes) {
	if m != nil {
		switch {
		case m.Scheduled != nil:
			cfg.Mode = ratelimit.Scheduled
		case m.OnlyIfUsed != nil:
			cfg.Mode = ratelimit.OnlyIfUsed
			if t := m.OnlyIfUsed.ThresholdPercentage; t != nil {
				cfg.ThresholdPercentage = clampInt(*t)
			}
		case m.GoBackN != nil:
			cfg.Mode = ratelimit.GoBackN
			g := m.GoBackN
			if g.ThresholdPercentage != nil {
				cfg.ThresholdPercentage = clampInt(*g.ThresholdPercentage)
			}
			if g.CoolDownPeriod != nil {
				cfg.CoolDownPeriod = g.CoolDownPeriod.Duration
			}
			if g.RampDownPercentage != nil {
				cfg.RampDownPercentage = clampInt(*g.RampDownPercentage)
			}
		}
	}
}

// ByteConfig returns the byte limiter's config of a rateLimit block
// (rateLimit.bytes), nil without one: bytes.max and bytes.min (default 1%
// of max, at least 1) with the block's ramp, mode and shadow, its store's
// settings, neither pacing nor adaptive cuts. It does not validate: [Check]
// does.
func ByteConfig(r *config.RateLimit) *ratelimit.Config {
	b := r.Bytes
	if b == nil {
		return nil
	}
	cfg := LimiterConfig(r)
	cfg.Max, cfg.Min = 0, clampInt64(b.GetMin())
	if b.Max != nil {
		cfg.Max = clampInt64(*b.Max)
	}
	cfg.Pacing, cfg.Adaptive = 0, false
	return &cfg
}

// Cost returns the cost of a message by the cost expression of a rateLimit
// block (rateLimit.cost), nil without one, or the expression's compile
// error. The cost is the expression's value rounded up, at most
// math.MaxInt32; a value that is negative or not a number, or a failed
// evaluation, costs 1 and returns an error.
func Cost(r *config.RateLimit) (func(*isb.Message) (int, error), error) {
	if r.Cost == nil {
		return nil, nil
	}
	c, err := expr.CompileCost(*r.Cost)
	if err != nil {
		return nil, err
	}
	return func(m *isb.Message) (int, error) {
		n, err := c.Of(m.Value, m.Headers, m.Keys)
		return int(min(n, math.MaxInt32)), err
	}, nil
}

// KeyConfig returns the per-key limiter's config of a rateLimit block:
// perKey's max and maxKeys, and the rate limit's onStoreFailure.
func KeyConfig(r *config.RateLimit) ratelimit.KeyConfig {
	p := r.PerKey
	cfg := ratelimit.KeyConfig{MaxKeys: MaxKeys(p), OnStoreFailure: LimiterConfig(r).OnStoreFailure}
	if p != nil && p.Max != nil {
		cfg.Max = clampInt64(*p.Max)
	}
	return cfg
}

// SignalKinds returns the kinds of throttle signal that cut the limit of a
// validated adaptive block: those it lists, or all of [isb.Signals].
func SignalKinds(a *config.Adaptive) []isb.SignalKind {
	if a.Signals == nil {
		return isb.Signals
	}
	kinds := make([]isb.SignalKind, 0, len(a.Signals))
	for _, s := range a.Signals {
		var k isb.SignalKind
		if k.UnmarshalText([]byte(s)) == nil {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

func clampInt64(v uint64) int64 { return int64(min(v, 1<<62)) }
func clampInt(v uint32) int     { return int(min(v, 1<<30)) }
