package sourcetransformer

import (
	"context"
	"time"
)

// SourceTransformer transforms the messages of a source as they are read:
// it may change their payload, keys, event time and user metadata, tag
// them, fan them out, drop them, or nack them to have them read again.
//
// Transform is called concurrently, once per message: it must be safe for
// concurrent use. As with mapper.Mapper, quick calls are made one after the
// other by the goroutine that receives the messages, and a call that takes
// long does not hold up the others. ctx is cancelled when the stream
// the message came on ends or fails. A panic fails the stream with a gRPC
// Internal error and shuts the server down (see Server).
type SourceTransformer interface {
	Transform(ctx context.Context, keys []string, d Datum) Messages
}

// SourceTransformerFunc adapts a function to the SourceTransformer
// interface.
type SourceTransformerFunc func(ctx context.Context, keys []string, d Datum) Messages

// Transform calls f.
func (f SourceTransformerFunc) Transform(ctx context.Context, keys []string, d Datum) Messages {
	return f(ctx, keys, d)
}

// Datum is one message as the source produced it. Its methods return the
// runtime's data, not copies: do not modify what they return.
type Datum interface {
	// ID identifies the message within the runtime.
	ID() string
	// Keys are the message's keys (also passed to Transform).
	Keys() []string
	// Value is the payload.
	Value() []byte
	// EventTime is the event time the source gave the message.
	EventTime() time.Time
	// Watermark is the source's watermark; zero if unknown.
	Watermark() time.Time
	// Headers are the message's headers.
	Headers() map[string]string
	// UserMetadata is a copy of the message's user metadata, never nil
	// (empty if it has none): change it freely, but not the bytes of its
	// values, and pass it on with Message.WithUserMetadata.
	UserMetadata() *UserMetadata
}
