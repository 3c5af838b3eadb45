package kafka

import (
	"errors"
	"strconv"
)

var (
	// ErrInvalidConfig is matched by every [*ConfigError].
	ErrInvalidConfig = errors.New("kafka: invalid config")
	// ErrClosed is returned by the calls on a closed [Source] or [Sink].
	ErrClosed = errors.New("kafka: closed")
)

// ConfigError is one invalid field or property of a source's or a sink's
// configuration. It never holds a secret: the value of a password or a client
// secret is left out.
type ConfigError struct {
	Role Role
	// Field names what is wrong: a field such as "consumerGroup", or a
	// property of the flat config such as "config property linger.ms".
	Field string
	// Value is the value given, when it is worth showing.
	Value string
	// Reason says what is expected: "is required", "must be one of ...".
	Reason string
}

func (e *ConfigError) Error() string {
	s := "kafka " + e.Role.String() + ": " + e.Field
	if e.Value != "" {
		s += " (" + strconv.Quote(e.Value) + ")"
	}
	return s + " " + e.Reason
}

// Unwrap makes every ConfigError match [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func configErr(role Role, field, value, reason string) error {
	return &ConfigError{Role: role, Field: field, Value: value, Reason: reason}
}
