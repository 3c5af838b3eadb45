package reduceclient

import (
	"errors"
)

// ErrClosed is returned by Stream.Send after CloseSend.
var ErrClosed = errors.New("reduce: the window's stream is half-closed")

// ErrEnded is matched by the error of Stream.Send when the server has ended
// the stream before the window did; Recv returns why.
var ErrEnded = errors.New("reduce: the server ended the window's stream")

// ErrKind is returned by New for a kind that is not a reduce kind.
var ErrKind = errors.New("reduce: not a reduce kind")
