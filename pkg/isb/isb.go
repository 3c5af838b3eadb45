// Package isb defines the messages a vertex moves and the small batch interfaces it
// moves them through: a [Reader] reads up to n messages into a buffer the caller
// owns and acks them once they are safe downstream; a [Writer] writes a batch and
// says, message by message, what became of it. Sources are Readers, sinks are
// Writers, and so are the two ends of an inter-step buffer.
package isb

import (
	"context"
	"errors"
	"time"
)

// Message is one record: its keys, its payload, when it happened, and its headers.
type Message struct {
	// ID identifies the message in its source (an offset, a sequence number).
	ID        string
	Keys      []string
	Value     []byte
	EventTime time.Time
	Headers   map[string]string
	// Tags route a message along conditional edges; a UDF sets them.
	Tags []string
}

// ReadMessage is a message read from a Reader, with what the Reader needs to ack it.
type ReadMessage struct {
	Message
	// Handle is the reader's own data for acking the message.
	Handle any
}

// Reader reads batches of messages.
//
// Read fills buf with at most len(buf) messages and returns how many it read. It
// returns as soon as it has any, after waiting at most its read timeout (or until
// ctx is done) when it has none; returning 0 with a nil error is normal. The
// messages in buf stay valid until they are acked.
//
// Ack acknowledges messages returned by Read, after every write for them has
// succeeded. Delivery is at least once: a message read and never acked may be read
// again, by this reader or another, when the source supports it.
type Reader interface {
	Read(ctx context.Context, buf []ReadMessage) (int, error)
	Ack(ctx context.Context, msgs []ReadMessage) error
}

// Writer writes batches of messages.
//
// Write tries every message in msgs and records in errs (len(errs) == len(msgs))
// what became of each: nil when written, an error matching [ErrFallback] when the
// message should go to the fallback sink, another error when it failed and may be
// retried. A non-nil return is an error for the whole batch, with errs unspecified.
// Write never keeps msgs or their payloads after it returns.
type Writer interface {
	Write(ctx context.Context, msgs []Message, errs []error) error
}

// Naker is implemented by readers that can hand messages back before their ack
// deadline.
//
// Nak gives up messages returned by Read and not acked: they are read again, by
// this reader or another, no sooner than delay from now (0: as soon as
// possible). A forwarder naks what it read but could not finish, so that the
// messages need not wait for the ack deadline to pass.
type Naker interface {
	Nak(ctx context.Context, msgs []ReadMessage, delay time.Duration) error
}

// Closer is implemented by readers and writers that hold resources.
type Closer interface {
	Close() error
}

var (
	// ErrFallback marks a message that its sink asks to be written to the fallback
	// sink instead.
	ErrFallback = errors.New("isb: route to fallback sink")
	// ErrBufferFull marks a message not written because the buffer is full: its
	// usage is at or above bufferUsageLimit of bufferMaxLength. The writer may
	// try again later (onFull: retryUntilSuccess) or give the message up
	// (discardLatest).
	ErrBufferFull = errors.New("isb: buffer full")
)
