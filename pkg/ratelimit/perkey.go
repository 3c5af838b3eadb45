package ratelimit

import (
	"errors"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/pkg/ratelimit/share"

	"github.com/sluiceflow/sluice/internal/enum"
)

// KeyMode says which of a message's keys a per-key limit counts. The zero
// value is [FirstKey].
type KeyMode uint8

const (
	// FirstKey counts a message under its first key.
	FirstKey KeyMode = iota
	// AllKeys counts a message under its whole key list, taken together as
	// one key.
	AllKeys
)

var keyModeNames = [...]string{FirstKey: "first", AllKeys: "all"}

// String returns the mode's YAML name: first or all.
func (m KeyMode) String() string { return enum.Name(keyModeNames[:], m, "KeyMode") }

// MarshalText returns the mode's YAML name.
func (m KeyMode) MarshalText() ([]byte, error) {
	return enum.Marshal(keyModeNames[:], m, "perKey.keys")
}

// UnmarshalText parses first or all and rejects any other name.
func (m *KeyMode) UnmarshalText(b []byte) error {
	return enum.Parse(m, keyModeNames[:], b, "perKey.keys")
}

// KeyOf returns the key that m counts for a message with keys, and false for
// a message without keys, which no per-key limit applies to. With AllKeys a
// list of several keys is one key: each quoted, joined by commas.
func (m KeyMode) KeyOf(keys []string) (string, bool) {
	switch {
	case len(keys) == 0:
		return "", false
	case m == FirstKey || len(keys) == 1:
		return keys[0], true
	}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k))
	}
	return b.String(), true
}

// DefaultMaxKeys is how many keys a [KeyLimiter] tracks at once by default.
const DefaultMaxKeys = 10_000

// KeyConfig is a per-key limit: at most Max tokens per key per one-second
// epoch, over every replica of the [share.KeyStore] (or in this process without one).
type KeyConfig struct {
	// Max is the most tokens one key may take in one epoch, 1 or more.
	Max int64
	// MaxKeys bounds the keys tracked at once (0 for DefaultMaxKeys); the
	// least recently used are forgotten first.
	MaxKeys int
	// OnStoreFailure is what Take does while the store cannot be reached:
	// Pause grants nothing to a key the store would have counted, LastKnown
	// counts in this process, each key getting this replica's share of Max.
	OnStoreFailure StoreFailurePolicy
}

// Validate reports every invalid field together, each as a [*FieldError].
func (c KeyConfig) Validate() error {
	var errs []error
	switch {
	case c.Max < 1:
		errs = append(errs, &FieldError{Field: "Max", Value: c.Max, Reason: "must be at least 1"})
	case c.Max > MaxTokens:
		errs = append(errs, &FieldError{Field: "Max", Value: c.Max, Reason: "must be at most 1000000000000"})
	}
	if c.MaxKeys < 0 {
		errs = append(errs, &FieldError{Field: "MaxKeys", Value: c.MaxKeys, Reason: "must not be negative"})
	}
	if int(c.OnStoreFailure) >= len(policyNames) {
		errs = append(errs, &FieldError{Field: "OnStoreFailure", Value: uint8(c.OnStoreFailure), Reason: "is not a known policy"})
	}
	return errors.Join(errs...)
}

// KeyRequest asks for tokens of one key (see share.KeyRequest).
type KeyRequest = share.KeyRequest

// KeyCount is the tokens granted to one key.
type KeyCount struct {
	Key    string
	Tokens int64
}

// KeyEpochSummary is what a [KeyLimiter] granted in one epoch, handed to the
// observer of [WithKeyEpochObserver] about half a second after the epoch
// ends (grants that come later still are handed over in a summary of their
// own), or when the limiter is closed.
type KeyEpochSummary struct {
	Epoch int64
	// Granted is the tokens granted in the epoch, all keys together, and
	// Keys how many keys got tokens.
	Granted int64
	Keys    int
	// Top is the keys granted the most, most first (then by key), at most
	// the number WithKeyEpochObserver asked for.
	Top []KeyCount
}

// KeyStatus is a snapshot of a [KeyLimiter].
type KeyStatus struct {
	// Epoch is the current epoch by the limiter's estimate of the store clock.
	Epoch int64
	// Keys is the number of keys tracked now, and Evictions the keys
	// forgotten so far to keep them under MaxKeys.
	Keys      int
	Evictions int64
	// Granted is the tokens granted so far, all keys together.
	Granted int64
	// StoreUp reports whether the last call to the store succeeded (true
	// without a store).
	StoreUp bool
}

// The options of a [KeyLimiter] are [Option]s: [WithClock] and [WithLogger]
// as for a Limiter, and these three of its own. Options that concern only a
// Limiter (WithStore, WithReplicaID, WithSyncInterval, WithEpochObserver,
// WithFixedReplicas) do nothing to a KeyLimiter, and these do nothing to a
// Limiter.

// WithKeyStore counts the keys in s, shared with every replica that uses it.
func WithKeyStore(s share.KeyStore) Option { return func(o *options) { o.keyStore = s } }

// WithKeyShare says how many replicas share the per-key limit and this
// one's rank among them, for counting in this process: without a store (a
// fixed count of replicas), or with one that cannot be reached and
// OnStoreFailure LastKnown. Each key then gets this replica's share of Max,
// as a [Limiter] shares its pool: floor(Max/size), plus one for the first
// Max mod size ranks. A size below 1 grants nothing. Without it, a limiter
// that counts in this process gives each key the whole Max.
func WithKeyShare(f func() (size, rank int)) Option { return func(o *options) { o.keyShare = f } }

// WithKeyEpochObserver calls f with a summary of each epoch, naming at most
// top keys (0 for 32), from the limiter's timer goroutine or from Close; the
// calls never overlap. f must not block.
func WithKeyEpochObserver(top int, f func(KeyEpochSummary)) Option {
	return func(o *options) { o.keyObserve, o.keyTop = f, top }
}
