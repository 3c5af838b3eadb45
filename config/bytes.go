package config

// ByteLimit is sluice's limit of a vertex's payload bytes per second, beside
// its message limit (a rateLimit block's bytes). It ramps from Min to Max by
// the block's rampUpDuration and modes, shares through the block's store, and
// can change while the vertex runs like max and min.
type ByteLimit struct {
	// Max is the most payload bytes per second, all replicas together
	// (required, at least 1).
	Max *uint64 `yaml:"max"`
	// Min is where the byte pool starts and the lowest it goes (default 1%
	// of Max, at least 1; at most Max).
	Min *uint64 `yaml:"min"`
}

// GetMin returns Min, or its default: 1% of max, at least 1.
func (b *ByteLimit) GetMin() uint64 {
	if b.Min != nil {
		return *b.Min
	}
	var m uint64
	if b.Max != nil {
		m = *b.Max / 100
	}
	return max(m, 1)
}
