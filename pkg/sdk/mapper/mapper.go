package mapper

import (
	"context"
	"time"
)

// Mapper is a unary map function: it turns one message into zero, one or
// many messages.
//
// Map is called concurrently, once per message: it must be safe for
// concurrent use. A call that takes long does not hold up the others: while
// calls are quick (tens of microseconds), the goroutine that receives the
// messages makes them itself, one after the other, and one that runs for a
// millisecond or two there has the receiving handed on to another
// goroutine; slower calls each get a goroutine of their own. ctx is cancelled when the stream the
// message came on ends or fails. To drop a message, return
// Messages{MessageToDrop()}; returning no message at all also produces
// nothing downstream. To have it delivered again later, return
// Messages{MessageToNack(opts)}. A panic in Map fails the stream with a gRPC Internal
// error and shuts the server down (see Server).
type Mapper interface {
	Map(ctx context.Context, keys []string, d Datum) Messages
}

// ReadyReporter is implemented by a Mapper that can be up and yet not take
// requests, such as one whose own downstream is not reachable. When the
// Mapper given to NewServer implements it, IsReady answers true only while
// the server serves and Ready returns nil.
type ReadyReporter interface {
	Ready() error
}

// MapperFunc adapts a function to the Mapper interface.
type MapperFunc func(ctx context.Context, keys []string, d Datum) Messages

// Map calls f.
func (f MapperFunc) Map(ctx context.Context, keys []string, d Datum) Messages {
	return f(ctx, keys, d)
}

// Datum is one input message. Its methods return the runtime's data, not
// copies: do not modify what they return.
type Datum interface {
	// ID identifies the message within the runtime.
	ID() string
	// Keys are the message's keys (also passed to Map).
	Keys() []string
	// Value is the payload.
	Value() []byte
	// EventTime is the message's event time; zero if it has none.
	EventTime() time.Time
	// Watermark is the vertex's watermark when the message was read; zero
	// if unknown.
	Watermark() time.Time
	// Headers are the message's headers.
	Headers() map[string]string
	// UserMetadata is a copy of the message's user metadata, never nil
	// (empty if it has none): change it freely, but not the bytes of its
	// values, and pass it on with Message.WithUserMetadata.
	UserMetadata() *UserMetadata
}
