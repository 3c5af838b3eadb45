package reducestreamer

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
)

// ReduceStreamer is a streaming reduce function: like reducer.Reducer it
// gets the messages of one window and keys, but it hands its results over on
// out as it makes them, before the window ends if it likes, and the server
// sends each at once.
//
// ReduceStream is called once per window and keys, in a goroutine of its own:
// it must be safe for concurrent use. It reads the window's messages from in
// until in is closed at the end of the window, sends its results on out, and
// returns when it has sent them all. It may close out when done, but need
// not; it must not send on out after it has returned. ctx is cancelled when
// the stream fails; ReduceStream should then return. A panic fails the stream
// with a gRPC Internal error and shuts the server down (see Server).
type ReduceStreamer interface {
	ReduceStream(ctx context.Context, keys []string, in <-chan Datum, out chan<- Message, md Metadata)
}

// ReduceStreamerFunc adapts a function to the ReduceStreamer interface.
type ReduceStreamerFunc func(ctx context.Context, keys []string, in <-chan Datum, out chan<- Message, md Metadata)

// ReduceStream calls f.
func (f ReduceStreamerFunc) ReduceStream(ctx context.Context, keys []string, in <-chan Datum, out chan<- Message, md Metadata) {
	f(ctx, keys, in, out, md)
}

// Datum is one input message of a window; see reducer.Datum.
type Datum = reducer.Datum

// Metadata tells ReduceStream about its window; see reducer.Metadata.
type Metadata = reducer.Metadata

// IntervalWindow is a window [Start, End) of event time.
type IntervalWindow = reducer.IntervalWindow

// Message is one result; see reducer.Message.
type Message = reducer.Message

// DropTag is the tag that marks a message to drop; see reducer.DropTag.
const DropTag = reducer.DropTag

// NewMessage returns a message with payload value; see reducer.NewMessage.
func NewMessage(value []byte) Message { return reducer.NewMessage(value) }

// MessageToDrop returns a message that the runtime drops.
func MessageToDrop() Message { return reducer.MessageToDrop() }

// UserMetadata is the metadata user code attaches to a message; see
// reducer.UserMetadata.
type UserMetadata = reducer.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return reducer.NewUserMetadata() }
