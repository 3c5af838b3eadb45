package sourcer

import (
	"context"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// Sourcer is a user-defined source: the runtime reads messages from it,
// then acknowledges those it has processed (or negatively acknowledges
// those it gives up on). Delivery is at least once: a message read but
// never acknowledged must be handed out again by a later Read.
//
// Read, Ack, Nack, Pending and Partitions may be called concurrently with
// each other (each stream or call runs in its own goroutine), but Read calls
// come one at a time per read stream. A panic in any of them fails its call
// with a gRPC Internal error and shuts the server down (see Server).
type Sourcer interface {
	// Read sends at most req.Count messages on out and returns within about
	// req.Timeout, sooner once it has sent req.Count messages or when ctx
	// ends. It may close out when done, but must not send on out after it
	// has returned. The server forwards no more than req.Count messages:
	// extra ones are dropped (and, not being acknowledged, must be read
	// again later).
	Read(ctx context.Context, req ReadRequest, out chan<- Message)
	// Ack acknowledges the messages at offsets: they are processed and must
	// never be read again.
	Ack(ctx context.Context, offsets []Offset)
	// Nack tells that the messages at offsets will not be acknowledged:
	// they should be read again, without waiting for a timeout. The options
	// the runtime gives a nack (a delay, say) reach a Sourcer that
	// implements OptionsNacker, which is then called instead.
	Nack(ctx context.Context, offsets []Offset)
	// Pending is the number of messages not yet read, or PendingUnknown.
	Pending(ctx context.Context) int64
	// Partitions lists the partitions this replica reads from;
	// DefaultPartitions suits a source that is not partitioned.
	Partitions(ctx context.Context) []int32
}

// ReadyReporter is implemented by a Sourcer that can be up and yet not take
// reads, such as one whose own source is not reachable yet. When the
// Sourcer given to NewServer implements it, IsReady answers true only while
// the server serves and Ready returns nil.
type ReadyReporter interface {
	Ready() error
}

// OptionsNacker is implemented by a Sourcer that honours the options of
// its nacks. When the Sourcer given to NewServer implements it, each NackFn
// call of the runtime becomes one call of NackWithOptions (not Nack), with
// one NackRequest per group of offsets in the call, in the runtime's order.
type OptionsNacker interface {
	// NackWithOptions tells that the messages of each request will not be
	// acknowledged: they should be read again, as the request's options
	// say (with nil options, or no delay, without waiting).
	NackWithOptions(ctx context.Context, reqs []NackRequest)
}

// NackRequest is a group of offsets that the runtime nacks together, with
// the options of the nack.
type NackRequest struct {
	// Offsets are the messages nacked.
	Offsets []Offset
	// Options are the nack's options, as the map function, transformer or
	// sink that nacked the messages gave them; nil if there are none.
	// Options.DelayDuration is how long to wait before handing the
	// messages out again.
	Options *NackOptions
}

// NackOptions are the options of a nack: a delay before the messages are
// delivered again (Delay, in milliseconds), a cap on their deliveries
// (MaxDeliveries), a Reason for the logs and free-form values (NackMap).
// Every field is optional; nil means unset.
type NackOptions = nack.Options

// UserMetadata is the metadata user code attaches to a message: named
// groups of keys with values of bytes, set on what a source reads with
// Message.WithUserMetadata (or its UserMetadata field) and carried with
// the message through the pipeline. The zero value is empty and ready to
// use; a nil *UserMetadata reads as empty.
type UserMetadata = metadata.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return metadata.NewUserMetadata() }

// PendingUnknown is what Pending returns when it cannot tell.
const PendingUnknown int64 = -1

// ReadRequest is what one Read is asked for.
type ReadRequest struct {
	// Count is the most messages Read may send. In sluice it is what the
	// vertex's rate limit grants at the moment.
	Count uint64
	// Timeout is how long Read may take.
	Timeout time.Duration
}

// Offset locates a message in the source.
type Offset struct {
	// Value identifies the message within its partition, in a form of the
	// source's choosing.
	Value []byte
	// PartitionID is the message's partition.
	PartitionID int32
}

// Message is one message a Read hands out.
type Message struct {
	// Value is the payload.
	Value []byte
	// Offset is where the message is in the source; the runtime passes it
	// back to Ack or Nack.
	Offset Offset
	// EventTime is the message's event time; zero means the time the
	// server forwards the message.
	EventTime time.Time
	// Keys are the message's keys.
	Keys []string
	// Headers are the message's headers.
	Headers map[string]string
	// UserMetadata is the message's user metadata; nil for none. The
	// server reads it only once Read has handed the message over: do not
	// change it afterwards (WithUserMetadata sets a copy).
	UserMetadata *UserMetadata
}

// WithUserMetadata returns a copy of m with a copy of md as its user
// metadata (nil: none), so that changing md afterwards does not change m.
func (m Message) WithUserMetadata(md *UserMetadata) Message {
	m.UserMetadata = nil
	if md != nil {
		m.UserMetadata = md.Clone()
	}
	return m
}
