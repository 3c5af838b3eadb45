package sessionreduceclient

import (
	"errors"
)

// ErrClosed is returned by the operations of a closed Client.
var ErrClosed = errors.New("sessionreduce: the client is closed")

// ErrStream is matched by the error of an operation whose stream failed
// (the server ended it, or a call waiting on it gave up): the sessions the
// server held are gone, and the next operation opens a new stream.
var ErrStream = errors.New("sessionreduce: the stream failed")
