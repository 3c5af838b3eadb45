package sourcer

import (
	"context"
	"time"
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
	// they should be read again, without waiting for a timeout.
	Nack(ctx context.Context, offsets []Offset)
	// Pending is the number of messages not yet read, or PendingUnknown.
	Pending(ctx context.Context) int64
	// Partitions lists the partitions this replica reads from;
	// DefaultPartitions suits a source that is not partitioned.
	Partitions(ctx context.Context) []int32
}

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
}
