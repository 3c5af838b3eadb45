package jetstream

import (
	"errors"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
)

var (
	// ErrAuth is matched by the error Connect returns when the server refuses
	// the credentials (authorization violation, expired or revoked
	// credentials). Retrying with the same configuration will not help.
	ErrAuth = errors.New("jetstream: authentication failed")
	// ErrInvalidName is matched by errors for a buffer name that cannot be a
	// stream name: empty, or with '.', '*', '>', a path separator or
	// whitespace in it.
	ErrInvalidName = errors.New("jetstream: invalid buffer name")
	// ErrInvalidConfig is matched by errors for a Config or BufferSpec field
	// out of range.
	ErrInvalidConfig = errors.New("jetstream: invalid config")
	// ErrBufferNotFound is matched by errors for a buffer whose stream or
	// consumer does not exist: CreateBuffer was not called, or the buffer
	// was deleted, or it used memory storage and the server restarted.
	ErrBufferNotFound = errors.New("jetstream: buffer not found")
	// ErrDecode is matched by errors for a message whose body is not an
	// encoded isb.Message. It is [jsconsumer.ErrDecode].
	ErrDecode = jsconsumer.ErrDecode
	// ErrNotConnected is matched by errors for calls made while the
	// connection is down and reconnecting; retry them later. It is
	// [jsconsumer.ErrNotConnected].
	ErrNotConnected = jsconsumer.ErrNotConnected
	// ErrClosed is returned by calls on a closed Reader or Writer.
	ErrClosed = errors.New("jetstream: closed")
)

// connErr marks err with ErrNotConnected when it comes from the connection
// being down: nothing is queued while reconnecting, and acks still awaited
// are failed when the connection drops.
func connErr(err error) error { return jsconsumer.ConnErr(err) }
