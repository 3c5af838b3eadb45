package config

import "github.com/sluiceflow/sluice/internal/enum"

// The config's enumerations that no runtime package defines. The others are
// the types of the packages that act on them, and config holds their YAML
// names as strings: rateLimit.onStoreFailure is a ratelimit.StoreFailurePolicy,
// perKey.keys a ratelimit.KeyMode, an edge's onFull a route.OnFull and its
// tags operator a route.Operator, isb.jetstream.storage a jetstream.Storage, a
// JetStream source's deliver_policy a jsconsumer.DeliverFrom, a sink's
// retryStrategy.onFailure a forward.OnFailure. Package vertexconfig parses
// each with its type's UnmarshalText, which rejects any other name with an
// error listing them, and reports that error once, with the field's path,
// value and line.

// RedisMode is how a redisStore reaches Redis. The zero value is
// [RedisModeUnset]: mode has no default, and validation requires one.
type RedisMode uint8

const (
	// RedisModeUnset is a redisStore without a mode.
	RedisModeUnset RedisMode = iota
	// RedisModeSingle is one Redis server at url.
	RedisModeSingle
	// RedisModeSentinel is the master a set of sentinels name.
	RedisModeSentinel
	// RedisModeCluster is a Redis Cluster, reached from the nodes at
	// cluster.addrs; it is sluice's addition.
	RedisModeCluster
)

var redisModeNames = [...]string{RedisModeUnset: "", RedisModeSingle: "single", RedisModeSentinel: "sentinel", RedisModeCluster: "cluster"}

// String returns the mode's YAML name: single, sentinel or cluster, or "" when
// unset.
func (m RedisMode) String() string { return enum.Name(redisModeNames[:], m, "RedisMode") }

// UnmarshalText parses single, sentinel or cluster, and rejects any other name.
func (m *RedisMode) UnmarshalText(b []byte) error {
	return enum.Parse(m, redisModeNames[:], b, "mode")
}
