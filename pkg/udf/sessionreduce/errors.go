package sessionreduce

import (
	"errors"

	"github.com/sluiceflow/sluice/internal/udsconn"
)

// ErrProtocol is matched by the errors of answers that break the session
// reduce framing: a result of a session not being closed, or a stream that
// ends with sessions still to answer. It matches udsconn.ErrProtocol too.
var ErrProtocol = udsconn.ErrProtocol

// ErrClosed is returned by the operations of a closed Client.
var ErrClosed = errors.New("sessionreduce: the client is closed")

// ErrStream is matched by the error of an operation whose stream failed
// (the server ended it, or a call waiting on it gave up): the sessions the
// server held are gone, and the next operation opens a new stream.
var ErrStream = errors.New("sessionreduce: the stream failed")
