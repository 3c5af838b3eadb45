package autoscale

import (
	"errors"
	"fmt"
)

// ErrRange is matched by the error of a [Config] setting out of range.
var ErrRange = errors.New("autoscale: setting out of range")

// RangeError is a [Config] setting out of range: Field is its scale
// field's YAML name ([Fields]), Value its value as written (seconds for a
// duration), Want the range it must be in.
type RangeError struct {
	Field, Value, Want string
}

// Error returns "scale.FIELD (VALUE) must be WANT".
func (e *RangeError) Error() string {
	return fmt.Sprintf("scale.%s (%s) must be %s", e.Field, e.Value, e.Want)
}

// Is reports whether target is [ErrRange].
func (e *RangeError) Is(target error) bool { return target == ErrRange }
