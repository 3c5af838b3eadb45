package sinker

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
)

// Sinker is a user-defined sink: it writes batches of messages somewhere
// and tells, per message, how that went.
//
// Sink reads datums until the channel is closed, at the end of the batch
// (it must not stop reading early), and returns one Response per datum,
// identified by the datum's ID, in any order; a datum left without a
// Response counts as failed. Datums arrive as the runtime sends them, so
// Sink may start writing before the batch is complete. Batches are passed
// one at a time per stream. ctx is cancelled when the stream ends or fails.
// A panic fails the stream with a gRPC Internal error and shuts the server
// down (see Server).
type Sinker interface {
	Sink(ctx context.Context, datums <-chan Datum) Responses
}

// ReadyReporter is implemented by a Sinker that can be up and yet not take
// requests, such as one whose own downstream is not reachable. When the
// Sinker given to NewServer implements it, IsReady answers true only while
// the server serves and Ready returns nil.
type ReadyReporter interface {
	Ready() error
}

// SinkerFunc adapts a function to the Sinker interface.
type SinkerFunc func(ctx context.Context, datums <-chan Datum) Responses

// Sink calls f.
func (f SinkerFunc) Sink(ctx context.Context, datums <-chan Datum) Responses {
	return f(ctx, datums)
}

// Datum is one message to write. Its methods return the runtime's data,
// not copies: do not modify what they return.
type Datum interface {
	// ID identifies the message; its Response must carry it.
	ID() string
	// Keys are the message's keys.
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
	// (empty if it has none); do not change the bytes of its values.
	UserMetadata() *UserMetadata
}

// UserMetadata is the metadata user code attached to a message upstream:
// named groups of keys with values of bytes (the headers meant for the
// sink's target, say). A nil *UserMetadata reads as empty.
type UserMetadata = metadata.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return metadata.NewUserMetadata() }
