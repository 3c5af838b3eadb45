package spawn

import (
	"errors"
	"fmt"
)

// ErrNoCommand is the error of [Start] for a container without a command:
// sluice cannot run its image.
var ErrNoCommand = errors.New("no command to run")

// DirError is the error of [Start] for a socket directory it cannot create.
type DirError struct {
	Dir string
	Err error
}

// Error names the directory and says why.
func (e *DirError) Error() string {
	return fmt.Sprintf("cannot create %s, the user-defined containers' socket directory (%v)", e.Dir, e.Err)
}

// Unwrap returns the error of creating the directory.
func (e *DirError) Unwrap() error { return e.Err }
