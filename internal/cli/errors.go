package cli

import (
	"errors"
	"flag"
	"fmt"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/udsconn"
)

// ErrHelp is returned by [FlagSet.ParseArgs] after -h printed the usage:
// the command exits 0.
var ErrHelp = flag.ErrHelp

// UsageError is bad input from the user: it exits with code 2.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a [UsageError] with the message format makes of args.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is the user's to fix: a flag, a config field, a
// user-defined server sluice cannot talk to.
func IsUsage(err error) bool {
	var ue *UsageError
	var fe *config.FieldError
	return errors.As(err, &ue) || errors.As(err, &fe) || errors.Is(err, udsconn.ErrIncompatible)
}
