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

	"github.com/sluiceflow/sluice/internal/enum"
)

// Message is one record: its keys, its payload, when it happened, its headers
// and its user metadata.
type Message struct {
	// ID identifies the message in its source (an offset, a sequence number).
	ID        string
	Keys      []string
	Value     []byte
	EventTime time.Time
	Headers   map[string]string
	// Metadata is the user metadata a source or a function attached; like the
	// headers, it travels with the message to the sink.
	Metadata Metadata
	// Tags route a message along conditional edges; a UDF sets them.
	Tags []string
	// Origin is the position, in the batch a forwarder read, of the message
	// this one was made from. The forwarder sets it on what it reads, and
	// functions copy it from each input to what the input produces, so that a
	// nack or a failed write can be traced back to the message to hand back.
	Origin int
	// Nack, when set, marks the answer of a function that rejected its input:
	// the message carries no data, is never written, and its origin is handed
	// back to the source, to be delivered again as Nack says.
	Nack *NackOptions
}

// Metadata is user metadata: named groups of key-value pairs (Numaflow's
// user_metadata).
type Metadata map[string]map[string][]byte

// NackOptions is how a rejected message is to come back, as the function or
// sink that nacked it asked. Every field is optional.
type NackOptions struct {
	// Reason says why, for logs and for a user-defined source.
	Reason string
	// Delay is the least time before the message is delivered again.
	Delay time.Duration
	// MaxDeliveries is the most deliveries the message should get (0: no
	// limit of its own); a user-defined source applies it.
	MaxDeliveries uint32
	// Values are free-form options, passed on to a user-defined source.
	Values map[string]string
	// RateLimited is set when a function handed its input back because what
	// it calls is rate limited: a throttle signal ([SignalMapRateLimited])
	// whose Retry-After is Delay.
	RateLimited bool
}

// ErrNack marks a message a sink nacked: it is not written, and the message it
// came from is handed back to the source. Errors that match it may be a
// [*NackError] with the sink's options.
var ErrNack = errors.New("isb: nacked")

// NackError is the error of a message a sink nacked, with its options.
type NackError struct{ Options NackOptions }

func (e *NackError) Error() string {
	if e.Options.Reason != "" {
		return "nacked: " + e.Options.Reason
	}
	return "nacked"
}

// Is makes a NackError match [ErrNack].
func (e *NackError) Is(target error) bool { return target == ErrNack }

// ThrottledError is the error of a message the downstream refused because it
// is rate limited, such as an HTTP endpoint that answered 429 Too Many
// Requests: the downstream is healthy, only busy, and the message is to be
// tried again no sooner than RetryAfter from now. It matches [ErrThrottled].
type ThrottledError struct {
	// RetryAfter is how long the downstream asked to wait; 0 when it did not
	// say, and the writer's own backoff applies.
	RetryAfter time.Duration
	// Cause says what the downstream answered, for logs.
	Cause string
	// Signal is the kind of throttle signal: one of [Signals], or
	// [SignalUnknown] when none is known.
	Signal SignalKind
}

// SignalKind is the kind of a throttle signal, as rateLimit.adaptive.signals
// names it. The zero value is [SignalUnknown].
type SignalKind uint8

const (
	// SignalUnknown is a throttle signal of no known kind; it has no name.
	SignalUnknown SignalKind = iota
	// SignalHTTP429 is an HTTP 429 Too Many Requests.
	SignalHTTP429
	// SignalHTTP503 is an HTTP 503 Service Unavailable.
	SignalHTTP503
	// SignalSinkRateLimited is a user-defined sink's failure whose error
	// message begins with the rate-limited marker.
	SignalSinkRateLimited
	// SignalMapRateLimited is a map's result tagged with the rate-limited
	// marker.
	SignalMapRateLimited
)

var signalNames = [...]string{SignalUnknown: "", SignalHTTP429: "http429", SignalHTTP503: "http503",
	SignalSinkRateLimited: "sinkRateLimited", SignalMapRateLimited: "mapRateLimited"}

// String returns the kind's YAML name: http429, http503, sinkRateLimited or
// mapRateLimited, or "" for SignalUnknown.
func (k SignalKind) String() string { return enum.Name(signalNames[:], k, "SignalKind") }

// UnmarshalText parses http429, http503, sinkRateLimited or mapRateLimited,
// and rejects any other name.
func (k *SignalKind) UnmarshalText(b []byte) error {
	return enum.Parse(k, signalNames[:], b, "signal")
}

// Signals lists every kind of throttle signal.
var Signals = []SignalKind{SignalHTTP429, SignalHTTP503, SignalSinkRateLimited, SignalMapRateLimited}

func (e *ThrottledError) Error() string {
	msg := "throttled by the downstream"
	if e.Cause != "" {
		msg += ": " + e.Cause
	}
	if e.RetryAfter > 0 {
		msg += "; retry after " + e.RetryAfter.String()
	}
	return msg
}

// Is makes a ThrottledError match [ErrThrottled].
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

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
//
// A forwarder reads from one goroutine. A pipelined one (streaming, read-ahead)
// acks and nacks from others while a Read is in progress, and acks batches out
// of the order they were read, but makes one Ack or Nack call at a time.
type Reader interface {
	Read(ctx context.Context, buf []ReadMessage) (int, error)
	Ack(ctx context.Context, msgs []ReadMessage) error
}

// PendingUnknown is what a reader's Pending method (a source that can tell
// how many of its messages are not read yet) returns when it cannot tell.
const PendingUnknown int64 = -1

// Writer writes batches of messages.
//
// Write tries every message in msgs and records in errs (len(errs) == len(msgs))
// what became of each: nil when written, an error matching [ErrFallback] when the
// message should go to the fallback sink, [ErrNack] when it is to be handed back
// to its source, [ErrBufferFull] when the buffer is full, [ErrThrottled] (often a
// [*ThrottledError]) when the downstream is rate limited and asks to be tried
// again later, [ErrRejected] when the downstream refused the message itself and
// trying it again will not help, another error when it failed and may be
// retried. A non-nil return is an error for the whole batch, with errs unspecified.
// Write never keeps msgs or their payloads after it returns.
type Writer interface {
	Write(ctx context.Context, msgs []Message, errs []error) error
}

// Nacker is implemented by readers that can hand messages back before their ack
// deadline.
//
// Nack gives up messages returned by Read and not acked: they are read again, by
// this reader or another, no sooner than delay from now (0: as soon as
// possible). A forwarder nacks what it read but could not finish, so that the
// messages need not wait for the ack deadline to pass.
type Nacker interface {
	Nack(ctx context.Context, msgs []ReadMessage, delay time.Duration) error
}

// OptionsNacker is implemented by readers whose source takes a nack's reason
// and options too, such as a user-defined source: NackOptions hands msgs back
// as Nack does, passing opts on.
type OptionsNacker interface {
	NackOptions(ctx context.Context, msgs []ReadMessage, opts NackOptions) error
}

// OffsetReader is implemented by the readers of an inter-step buffer
// partition, whose messages have offsets: positions in the partition, larger
// for a message written later (messages written together may share one).
// Watermarks use them to tell what a reader has read of what a writer wrote.
type OffsetReader interface {
	// Offset returns the offset of m, a message Read returned and not yet
	// acked or nacked.
	Offset(m *ReadMessage) int64
	// StartOffset returns an offset at or before which every message was
	// acked when the reader started (0 when none is known): messages a
	// reader before it finished.
	StartOffset() int64
}

// PartitionReader is implemented by sources whose messages come from
// partitions, such as a Kafka topic's: a source vertex computes its
// watermark per partition, so that a partition behind the others holds it.
type PartitionReader interface {
	// Partition returns the partition m came from, a message Read returned
	// and not yet acked.
	Partition(m *ReadMessage) int32
	// OnPartitionsGone makes the reader call f with the partitions taken
	// away from it (by a consumer group's rebalance), which then hold the
	// watermark back no more. f must not block.
	OnPartitionsGone(f func(partitions []int32))
}

// AckFloorer is implemented by the readers of a buffer partition that
// several readers share (the replicas of a vertex) and whose buffer knows
// what all of them have acked.
type AckFloorer interface {
	// AckFloor returns the offset at or before which every message of the
	// partition is acked, by any reader of it.
	AckFloor(ctx context.Context) (int64, error)
}

// OffsetWriter is implemented by the writers to an inter-step buffer
// partition whose messages have offsets (see [OffsetReader]).
type OffsetWriter interface {
	// LastOffset returns an offset at or after that of every message the
	// writer has written, 0 before it has written any. It may be called
	// from any goroutine, while a Write is in progress too.
	LastOffset() int64
}

// Closer is implemented by readers and writers that hold resources.
type Closer interface {
	Close() error
}

var (
	// ErrFallback marks a message that its sink asks to be written to the fallback
	// sink instead.
	ErrFallback = errors.New("isb: route to fallback sink")
	// ErrOnSuccess marks a message its sink wrote and asks to be written to
	// the on-success sink as well, as an [*OnSuccessError] says.
	ErrOnSuccess = errors.New("isb: route to on-success sink")
	// ErrBufferFull marks a message not written because the buffer is full: its
	// usage is at or above bufferUsageLimit of bufferMaxLength. The writer may
	// try again later (onFull: retryUntilSuccess) or give the message up
	// (discardLatest).
	ErrBufferFull = errors.New("isb: buffer full")
	// ErrThrottled marks a message the downstream refused because it is rate
	// limited: the writer is to try it again later, as a [*ThrottledError]
	// says when it is one, and the downstream is not failing.
	ErrThrottled = errors.New("isb: throttled by the downstream")
	// ErrRejected marks a message the downstream refused for what it is, such
	// as an HTTP endpoint answering 400 Bad Request: trying it again will not
	// help.
	ErrRejected = errors.New("isb: rejected by the downstream")
	// ErrUnavailable marks a write that failed because the server written to
	// failed or went away (a user-defined sink that crashed): the writer is
	// to try it again once the server is back, and the attempt uses none of
	// the message's retry steps.
	ErrUnavailable = errors.New("isb: the downstream's server is unavailable")
)

// OnSuccessError is a sink's answer ON_SUCCESS for one message: written, and
// to be written to the on-success sink too, as Message when it is set (its
// Value and Keys, and its Metadata when that is not nil), else as it is.
// It matches [ErrOnSuccess].
type OnSuccessError struct {
	Message *Message
}

func (e *OnSuccessError) Error() string { return ErrOnSuccess.Error() }

// Is reports whether target is ErrOnSuccess.
func (e *OnSuccessError) Is(target error) bool { return target == ErrOnSuccess }

// OnSuccessMessage returns what goes to the on-success sink for m, which its
// sink answered with err (matching ErrOnSuccess): m itself, or m with the
// value, keys and (when given) user metadata of the sink's message.
func OnSuccessMessage(m Message, err error) Message {
	var oe *OnSuccessError
	if !errors.As(err, &oe) || oe.Message == nil {
		return m
	}
	m.Value, m.Keys = oe.Message.Value, oe.Message.Keys
	if oe.Message.Metadata != nil {
		m.Metadata = oe.Message.Metadata
	}
	return m
}
