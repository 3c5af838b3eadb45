package config

import "github.com/sluiceflow/sluice/internal/enum"

// The config's enumerations that no package below config defines. The others
// are the types of the packages that act on them: rateLimit.onStoreFailure is
// a [ratelimit.StoreFailurePolicy], an edge's onFull a [route.OnFull] and its
// tags operator a [route.Operator], isb.jetstream.storage a
// [jetstream.Storage], a JetStream source's deliver_policy a
// [jsconsumer.DeliverFrom] (a [jsconsumer.DeliverPolicy] and where it
// starts). Each parses its YAML names with UnmarshalText, which rejects any
// other name with an error listing them; the loader reports that error once,
// with the field's path, value and line.

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
)

var redisModeNames = [...]string{RedisModeUnset: "", RedisModeSingle: "single", RedisModeSentinel: "sentinel"}

// String returns the mode's YAML name: single or sentinel, or "" when unset.
func (m RedisMode) String() string { return enum.Name(redisModeNames[:], m, "RedisMode") }

// UnmarshalText parses single or sentinel, and rejects any other name.
func (m *RedisMode) UnmarshalText(b []byte) error {
	return enum.Parse(m, redisModeNames[:], b, "mode")
}

// OnFailure is what a sink does with a message it still fails to write once
// retryStrategy's backoff is spent. The zero value is [OnFailureRetry].
// An unset retryStrategy.onFailure is not the zero value: sluice then retries,
// or, with a fallback sink, falls back after some attempts.
type OnFailure uint8

const (
	// OnFailureRetry goes on retrying the message.
	OnFailureRetry OnFailure = iota
	// OnFailureFallback writes the message to the fallback sink.
	OnFailureFallback
	// OnFailureDrop gives the message up.
	OnFailureDrop
)

var onFailureNames = [...]string{OnFailureRetry: "retry", OnFailureFallback: "fallback", OnFailureDrop: "drop"}

// String returns the YAML name: retry, fallback or drop.
func (f OnFailure) String() string { return enum.Name(onFailureNames[:], f, "OnFailure") }

// UnmarshalText parses retry, fallback or drop, and rejects any other name.
func (f *OnFailure) UnmarshalText(b []byte) error {
	return enum.Parse(f, onFailureNames[:], b, "onFailure")
}
