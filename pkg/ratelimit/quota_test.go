package ratelimit

import (
	"go.uber.org/zap"
)

// newTestQuota returns the quota of a limiter of cfg without a store.
func newTestQuota(cfg Config) *quota {
	return &quota{cfg: newQuotaConfig(cfg.withDefaults(), false, false), log: zap.NewNop()}
}
