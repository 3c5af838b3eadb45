package config

// PerKeyLimit is sluice's per-key limit of a rateLimit block: besides the
// vertex-wide pool, each message key gets at most Max messages a second,
// all replicas together. Messages over it wait, and do not hold up other
// keys; messages without keys are under the vertex's limit only.
type PerKeyLimit struct {
	// Max is the most messages per key per second, all replicas together
	// (required, 1 to the rate limit's max).
	Max *uint64 `yaml:"max"`
	// Keys is which keys count: first (the default), a message's first key;
	// all, its whole key list as one key (a ratelimit.KeyMode's name).
	Keys *string `yaml:"keys"`
	// MaxKeys is how many keys a replica tracks at once (default 10000, the
	// ratelimit package's DefaultMaxKeys; at most MaxPerKeyKeys),
	// forgetting the least recently used first.
	MaxKeys *uint64 `yaml:"maxKeys"`
	// MaxHeld is how many messages a replica holds at once, per input
	// (default four read batches). A full hold hands its newest messages
	// back to a source that takes them, to deliver again later, and
	// otherwise stops reads until held messages go on.
	MaxHeld *uint64 `yaml:"maxHeld"`
}

// Bounds of the per-key fields.
const (
	MaxPerKeyKeys = 10_000_000
	MaxPerKeyHeld = 1_000_000
)

// GetMaxHeld returns maxHeld or its default, four read batches of
// readBatchSize.
func (p *PerKeyLimit) GetMaxHeld(readBatchSize int) int {
	if p == nil || p.MaxHeld == nil {
		return min(4*readBatchSize, MaxPerKeyHeld)
	}
	return int(min(*p.MaxHeld, MaxPerKeyHeld))
}

// perKey checks rateLimit.perKey at path.
func (c *checker) perKey(path string, r *RateLimit) {
	p := r.PerKey
	switch {
	case p.Max == nil:
		c.required(path + ".max")
	case *p.Max < 1:
		c.add(path+".max", "(%d) must be at least 1", *p.Max)
	case r.Max != nil && *r.Max >= 1 && *p.Max > *r.Max:
		c.add(path+".max", "(%d) > max (%d): a key never gets more than the vertex", *p.Max, *r.Max)
	}
	if p.MaxKeys != nil && (*p.MaxKeys < 1 || *p.MaxKeys > MaxPerKeyKeys) {
		c.add(path+".maxKeys", "(%d) must be between 1 and %d", *p.MaxKeys, MaxPerKeyKeys)
	}
	if p.MaxHeld != nil && (*p.MaxHeld < 1 || *p.MaxHeld > MaxPerKeyHeld) {
		c.add(path+".maxHeld", "(%d) must be between 1 and %d", *p.MaxHeld, MaxPerKeyHeld)
	}
	if r.IsShadow() {
		c.add(path, "is not supported with shadow: shadow lets every message through, and perKey holds some; remove one")
	}
}
