package bench

import (
	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// The variants [Target.Named] makes, as vertex bench --variants names them.
const (
	// VariantBytes adds a byte limit that never throttles.
	VariantBytes = "bytes"
	// VariantCost adds the cost expression [CostExpr].
	VariantCost = "cost"
	// VariantGroup joins a shared limit that never throttles.
	VariantGroup = "group"
	// VariantPage is [Target.PageVariant]: the status page open. Its name,
	// the value of --variants and the label of its results, is live.
	VariantPage = "live"
)

// CostExpr is the cost expression of [VariantCost]: it reads the payload
// and gives 1 for any payload up to a megabyte, so that the limit counts as
// it does without it.
const CostExpr = "len(payload) / 1000000"

// namedChanges are the variants but the page's: how each changes a rateLimit
// block.
var namedChanges = map[string]func(*config.RateLimit){
	VariantBytes: func(rl *config.RateLimit) {
		max := uint64(ratelimit.MaxTokens) // far above what one process moves
		rl.Bytes = &config.ByteLimit{Max: &max, Min: &max}
	},
	VariantCost: func(rl *config.RateLimit) {
		cost := CostExpr
		rl.Cost = &cost
	},
	VariantGroup: func(rl *config.RateLimit) {
		max, ramp := uint64(ratelimit.MaxTokens), config.Duration{}
		rl.Groups = append(rl.Groups, config.GroupLimit{Name: "bench", Max: &max, Min: &max, RampUpDuration: &ramp})
	},
}

// IsNamed reports whether name is a variant of [Target.Named].
func IsNamed(name string) bool {
	_, ok := namedChanges[name]
	return ok || name == VariantPage
}

// Named returns the variant name of t, one of VariantBytes, VariantCost,
// VariantGroup and VariantPage; ok is false for any other name.
func (t *Target) Named(name string) (v Variant, ok bool) {
	if name == VariantPage {
		return t.PageVariant(name), true
	}
	change, ok := namedChanges[name]
	if !ok {
		return Variant{}, false
	}
	return t.Variant(name, change), true
}

// PairedRatio is the median of the ratios of r's runs to b's, each to the
// one run beside it: a load that comes and goes on a shared machine moves
// both runs of a pair alike, so it sways this less than the ratio of the
// medians. Pairs where b measured 0 are left out; with none left it is 0.
func (r Runs) PairedRatio(b Runs) float64 {
	n := min(len(r.Rates), len(b.Rates))
	ratios := make([]float64, 0, n)
	for i := range n {
		if b.Rates[i] > 0 {
			ratios = append(ratios, r.Rates[i]/b.Rates[i])
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	return Median(ratios)
}
