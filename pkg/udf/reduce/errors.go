package reduce

import (
	"errors"

	"github.com/sluiceflow/sluice/internal/udsconn"
)

// ErrProtocol is matched by the errors of answers that break the reduce
// framing: a result of another window, a stream that ends without EOF, or
// answers after EOF. It matches udsconn.ErrProtocol too.
var ErrProtocol = udsconn.ErrProtocol

// ErrClosed is returned by Stream.Send after CloseSend.
var ErrClosed = errors.New("reduce: the window's stream is half-closed")

// ErrEnded is matched by the error of Stream.Send when the server has ended
// the stream before the window did; Recv returns why.
var ErrEnded = errors.New("reduce: the server ended the window's stream")

// ErrKind is returned by New for a kind that is not a reduce kind.
var ErrKind = errors.New("reduce: not a reduce kind")
