package config

import "fmt"

// The config's enumerations that no package below config defines. The others
// are the types of the packages that act on them: rateLimit.onStoreFailure is
// a [ratelimit.StoreFailurePolicy], an edge's onFull a [route.OnFull] and its
// tags operator a [route.Operator]. Each parses its YAML names with
// UnmarshalText, which rejects any other name with an error listing them; the
// loader reports that error once, with the field's path, value and line.

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
func (m RedisMode) String() string {
	if int(m) < len(redisModeNames) {
		return redisModeNames[m]
	}
	return fmt.Sprintf("RedisMode(%d)", uint8(m))
}

// UnmarshalText parses single or sentinel, and rejects any other name.
func (m *RedisMode) UnmarshalText(b []byte) error {
	return parseName(m, b, redisModeNames[:], "mode", "single or sentinel")
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
func (f OnFailure) String() string {
	if int(f) < len(onFailureNames) {
		return onFailureNames[f]
	}
	return fmt.Sprintf("OnFailure(%d)", uint8(f))
}

// UnmarshalText parses retry, fallback or drop, and rejects any other name.
func (f *OnFailure) UnmarshalText(b []byte) error {
	return parseName(f, b, onFailureNames[:], "onFailure", "retry, fallback or drop")
}

// Storage is where a JetStream ISB's streams keep their messages. The zero
// value is [FileStorage], the default.
type Storage uint8

const (
	// FileStorage keeps messages on the server's disk: they survive a server
	// restart.
	FileStorage Storage = iota
	// MemoryStorage keeps messages in the server's memory: a server restart
	// loses them.
	MemoryStorage
)

var storageNames = [...]string{FileStorage: "file", MemoryStorage: "memory"}

// String returns the YAML name: file or memory.
func (s Storage) String() string {
	if int(s) < len(storageNames) {
		return storageNames[s]
	}
	return fmt.Sprintf("Storage(%d)", uint8(s))
}

// UnmarshalText parses file or memory, and rejects any other name.
func (s *Storage) UnmarshalText(b []byte) error {
	return parseName(s, b, storageNames[:], "storage", "file or memory")
}

// parseName sets *v to the value whose name b is, or says that b is not one of
// want. An empty name (an unset value's) is never matched.
func parseName[T ~uint8](v *T, b []byte, names []string, field, want string) error {
	for i, name := range names {
		if name != "" && name == string(b) {
			*v = T(i)
			return nil
		}
	}
	return fmt.Errorf("unknown %s %q (want %s)", field, b, want)
}
