package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// quantitySuffixes are the multipliers of Kubernetes' quantity suffixes.
var quantitySuffixes = []struct {
	suffix string
	factor float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// ParseQuantity parses a Kubernetes quantity ("500m", "2", "128Mi", "1e3",
// "1.5G") into its value in base units: cores for a CPU, bytes for memory.
func ParseQuantity(s string) (float64, error) {
	num := s
	factor := 1.0
	for _, q := range quantitySuffixes {
		if strings.HasSuffix(s, q.suffix) {
			num, factor = strings.TrimSuffix(s, q.suffix), q.factor
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.ContainsAny(num, "xXpP_") || math.IsInf(v, 0) || math.IsNaN(v) || v < 0 {
		return 0, fmt.Errorf("%q is not a quantity (want a number with an optional suffix: m, k, M, G, Ki, Mi, Gi, ...)", s)
	}
	return v * factor, nil
}
