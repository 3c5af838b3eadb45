package mapstreamer

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// MapStreamer is a streaming map function: it turns one message into any
// number of messages, handing each over as soon as it is ready instead of
// all at once at the end.
//
// MapStream sends its messages on out and returns when it has sent them
// all. It may close out when done, but need not; it must not send on out
// after it has returned. Each message is streamed in its own goroutine, so
// MapStream must be safe for concurrent use. ctx is cancelled when the
// stream the message came on ends or fails; MapStream should then return.
// A panic fails the stream with a gRPC Internal error and shuts the server
// down (see Server).
type MapStreamer interface {
	MapStream(ctx context.Context, keys []string, d Datum, out chan<- Message)
}

// ReadyReporter is implemented by a MapStreamer that can be up and yet not
// take requests, such as one whose own downstream is not reachable. When the
// MapStreamer given to NewServer implements it, IsReady answers true only
// while the server serves and Ready returns nil.
type ReadyReporter interface {
	Ready() error
}

// MapStreamerFunc adapts a function to the MapStreamer interface.
type MapStreamerFunc func(ctx context.Context, keys []string, d Datum, out chan<- Message)

// MapStream calls f.
func (f MapStreamerFunc) MapStream(ctx context.Context, keys []string, d Datum, out chan<- Message) {
	f(ctx, keys, d, out)
}

// Datum is one input message; see mapper.Datum.
type Datum = mapper.Datum

// Message is one output message; see mapper.Message.
type Message = mapper.Message

// DropTag is the tag that marks a message to drop; see mapper.DropTag.
const DropTag = mapper.DropTag

// NewMessage returns a message with payload value; see mapper.NewMessage.
func NewMessage(value []byte) Message { return mapper.NewMessage(value) }

// MessageToDrop returns a message that tells the runtime to drop its input.
func MessageToDrop() Message { return mapper.MessageToDrop() }

// NackTag is the tag that marks a message as a negative acknowledgement of
// its input; see mapper.NackTag.
const NackTag = mapper.NackTag

// NackOptions tell the runtime how to redeliver a nacked message; see
// mapper.NackOptions.
type NackOptions = mapper.NackOptions

// MessageToNack returns a message that negatively acknowledges its input,
// to be delivered again as opts say (nil: the runtime's defaults); see
// mapper.MessageToNack.
func MessageToNack(opts *NackOptions) Message { return mapper.MessageToNack(opts) }

// RateLimitedTag marks a message as a throttle signal; see
// mapper.RateLimitedTag.
const RateLimitedTag = mapper.RateLimitedTag

// MessageRateLimited returns a message that says what the function calls is
// rate limited, to hand its input back after retryAfter; see
// mapper.MessageRateLimited.
func MessageRateLimited(retryAfter time.Duration) Message {
	return mapper.MessageRateLimited(retryAfter)
}

// UserMetadata is the metadata user code attaches to a message; see
// mapper.UserMetadata.
type UserMetadata = mapper.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return mapper.NewUserMetadata() }
