package reducer

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/reduceserve"
)

// Reducer is a reduce function: it turns the messages of one window and keys
// into zero, one or many messages, once the window has ended.
//
// Reduce is called once per window and keys, in a goroutine of its own, as
// soon as the first message of that window and keys arrives: calls for
// different windows or keys run concurrently, so Reduce must be safe for
// concurrent use; state for one window lives in its call. It reads the
// window's messages from in, in the order the runtime sent them, until in is
// closed at the end of the window, and returns its results, which the server
// then sends. Returning before in is closed is allowed; the window's remaining
// messages are then dropped. ctx is cancelled when the stream fails. A panic
// fails the stream with a gRPC Internal error and shuts the server down (see
// Server).
type Reducer interface {
	Reduce(ctx context.Context, keys []string, in <-chan Datum, md Metadata) Messages
}

// ReducerFunc adapts a function to the Reducer interface.
type ReducerFunc func(ctx context.Context, keys []string, in <-chan Datum, md Metadata) Messages

// Reduce calls f.
func (f ReducerFunc) Reduce(ctx context.Context, keys []string, in <-chan Datum, md Metadata) Messages {
	return f(ctx, keys, in, md)
}

// Datum is one input message of a window: Value, EventTime, Watermark,
// Headers and UserMetadata (a copy, never nil). Its methods return the
// runtime's data, not copies: do not modify what they return.
type Datum = reduceserve.Datum

// Metadata tells Reduce about its call: IntervalWindow, the window [Start,
// End) of event time the messages belong to. The runtime gives the results
// the event time End minus one millisecond.
type Metadata = reduceserve.Metadata

// IntervalWindow is a window [Start, End) of event time.
type IntervalWindow = reduceserve.IntervalWindow

// Message is one result of a reduce function. Build it with NewMessage or
// MessageToDrop; WithKeys, WithTags and WithUserMetadata return modified
// copies.
type Message = reduceserve.Message

// Messages are the results of one call of Reduce.
type Messages []Message

// DropTag is the tag that marks a message to drop: the literal text
// "U+005C__DROP__", as Numaflow's protocol has it.
const DropTag = reduceserve.DropTag

// NewMessage returns a message with payload value, no keys, no tags and no
// user metadata.
func NewMessage(value []byte) Message { return reduceserve.NewMessage(value) }

// MessageToDrop returns a message that the runtime drops: it carries DropTag
// and nothing else.
func MessageToDrop() Message { return reduceserve.MessageToDrop() }

// UserMetadata is the metadata user code attaches to a message; see
// mapper.UserMetadata.
type UserMetadata = metadata.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return metadata.NewUserMetadata() }
