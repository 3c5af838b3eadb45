package watermark

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidConfig is matched by every [*ConfigError].
	ErrInvalidConfig = errors.New("watermark: invalid config")
	// ErrInvalidProcessor is returned for a processor name that
	// [ValidProcessor] rejects.
	ErrInvalidProcessor = errors.New("watermark: invalid processor name")
	// ErrClosed is returned by calls on a closed [Publisher].
	ErrClosed = errors.New("watermark: publisher closed")
	// ErrNoStore is returned by [NewFetcher] given no store to read.
	ErrNoStore = errors.New("watermark: no store")
)

// ConfigError says which setting of a [Config] is wrong. Field is the
// setting's name under spec.watermark, e.g. "idleSource.threshold".
type ConfigError struct {
	Field  string
	Value  time.Duration
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("watermark: %s (%s) %s", e.Field, e.Value, e.Reason)
}

// Is makes every ConfigError match [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
