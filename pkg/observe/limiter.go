package observe

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// RegisterLimiter registers the gauges of a rate limiter with reg, which should
// carry the vertex and replica labels. They read status at each scrape.
func RegisterLimiter(reg prometheus.Registerer, status func() ratelimit.Status) {
	registerLimiter(reg, status, func(name, help string) (string, string) { return name, help })
}

// RegisterByteLimiter registers the gauges of a byte limiter (rateLimit.bytes)
// with reg: those of [RegisterLimiter], named sluice_ratelimit_bytes_* in
// place of sluice_ratelimit_*, whose tokens are payload bytes, but for the
// cuts, pauses and ceiling of throttle signals, which never apply to it,
// and the tokens lent and borrowed between regions.
func RegisterByteLimiter(reg prometheus.Registerer, status func() ratelimit.Status) {
	registerLimiter(reg, status, func(name, help string) (string, string) {
		switch name {
		case "sluice_ratelimit_cuts_total", "sluice_ratelimit_paused_until_seconds", "sluice_ratelimit_ceiling_tokens",
			"sluice_ratelimit_lent_tokens_total", "sluice_ratelimit_borrowed_tokens_total":
			return "", ""
		}
		return "sluice_ratelimit_bytes_" + strings.TrimPrefix(name, "sluice_ratelimit_"),
			"The byte limit (rateLimit.bytes), in payload bytes: " + help
	})
}

// registerLimiter registers the gauges of a limiter under the names and
// helps rename gives, but those it gives no name.
func registerLimiter(reg prometheus.Registerer, status func() ratelimit.Status, rename func(name, help string) (string, string)) {
	gauge := func(name, help string, value func(ratelimit.Status) float64) {
		if name, help = rename(name, help); name == "" {
			return
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return value(status()) }))
	}
	counter := func(name, help string, value func(ratelimit.Status) float64) {
		if name, help = rename(name, help); name == "" {
			return
		}
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return value(status()) }))
	}
	gauge("sluice_ratelimit_pool_tokens", "The vertex's token pool P for the current epoch.",
		func(s ratelimit.Status) float64 { return s.Pool() })
	gauge("sluice_ratelimit_share_tokens", "This replica's share of the pool in the current epoch.",
		func(s ratelimit.Status) float64 { return float64(s.Share) })
	gauge("sluice_ratelimit_epoch_granted_tokens", "Tokens granted in the current epoch, less deposits.",
		func(s ratelimit.Status) float64 { return float64(s.Granted) })
	gauge("sluice_ratelimit_max_tokens", "The rate limit in force (rateLimit.max), which a live change of the config sets.",
		func(s ratelimit.Status) float64 { return float64(s.Max) })
	gauge("sluice_ratelimit_pool_size", "Number of replicas the pool is split among.",
		func(s ratelimit.Status) float64 { return float64(s.Replicas) })
	counter("sluice_ratelimit_cuts_total", "Cuts of the pool by throttle signals (rateLimit.adaptive) this replica applied.",
		func(s ratelimit.Status) float64 { return float64(s.Cuts) })
	counter("sluice_ratelimit_shadow_throttled_total", "Tokens the rate limit would have throttled and let through (rateLimit.shadow).",
		func(s ratelimit.Status) float64 { return float64(s.ShadowThrottled) })
	gauge("sluice_ratelimit_paused_until_seconds", "End of the pause a throttle signal's Retry-After asked for, in Unix seconds of the store clock, while it lasts; 0 otherwise.",
		func(s ratelimit.Status) float64 {
			if s.PausedUntil.IsZero() {
				return 0
			}
			return float64(s.PausedUntil.UnixNano()) / 1e9
		})
	gauge("sluice_ratelimit_ceiling_tokens", "The learnt ceiling (rateLimit.adaptive) that caps the pool's climb: the pool at which the last cut's throttle signal came; 0 when there is none.",
		func(s ratelimit.Status) float64 { return float64(s.CeilingMilli) / 1000 })
	gauge("sluice_ratelimit_store_up", "1 while the last sync with the rate limiter's store succeeded (always 1 without a store).",
		func(s ratelimit.Status) float64 {
			if s.StoreUp {
				return 1
			}
			return 0
		})
	counter("sluice_ratelimit_lent_tokens_total", "Tokens this replica did not use and lent to the others through the store's spare.",
		func(s ratelimit.Status) float64 { return float64(s.Lent) })
	counter("sluice_ratelimit_borrowed_tokens_total", "Tokens this replica borrowed from the store's spare, which others did not use.",
		func(s ratelimit.Status) float64 { return float64(s.Borrowed) })
}

// RegisterGroup registers the gauges of a replica of a shared limit (a
// group) the vertex joined with reg, labelled with the group's name: those
// of [RegisterLimiter] of its pool, shares, grants and lending, named
// sluice_ratelimit_group_* in place of sluice_ratelimit_*.
func RegisterGroup(reg prometheus.Registerer, group string, status func() ratelimit.Status) {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"group": group}, reg)
	registerLimiter(reg, status, func(name, help string) (string, string) {
		switch name {
		case "sluice_ratelimit_pool_tokens", "sluice_ratelimit_share_tokens", "sluice_ratelimit_epoch_granted_tokens",
			"sluice_ratelimit_max_tokens", "sluice_ratelimit_pool_size",
			"sluice_ratelimit_lent_tokens_total", "sluice_ratelimit_borrowed_tokens_total":
			return "sluice_ratelimit_group_" + strings.TrimPrefix(name, "sluice_ratelimit_"),
				"A shared limit (rateLimit.groups), all its members together: " + help
		}
		return "", ""
	})
}
