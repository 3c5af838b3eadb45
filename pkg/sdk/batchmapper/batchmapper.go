package batchmapper

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// BatchMapper is a batch map function: it receives a whole batch of
// messages and answers each of them with zero, one or many messages.
//
// BatchMap reads datums until the channel is closed, at the end of the batch
// (it must not stop reading early), and returns exactly one BatchResponse
// per datum, identified by the datum's ID, in any order. Datums arrive as
// the runtime sends them, so BatchMap may start work before the batch is
// complete. Batches are passed one at a time per stream. ctx is cancelled
// when the stream ends or fails. A panic fails the stream with a gRPC
// Internal error and shuts the server down (see Server).
type BatchMapper interface {
	BatchMap(ctx context.Context, datums <-chan Datum) BatchResponses
}

// ReadyReporter is implemented by a BatchMapper that can be up and yet not take
// requests, such as one whose own downstream is not reachable. When the
// BatchMapper given to NewServer implements it, IsReady answers true only while
// the server serves and Ready returns nil.
type ReadyReporter interface {
	Ready() error
}

// BatchMapperFunc adapts a function to the BatchMapper interface.
type BatchMapperFunc func(ctx context.Context, datums <-chan Datum) BatchResponses

// BatchMap calls f.
func (f BatchMapperFunc) BatchMap(ctx context.Context, datums <-chan Datum) BatchResponses {
	return f(ctx, datums)
}

// Datum is one input message; see mapper.Datum. Its ID is what the
// BatchResponse for it must carry.
type Datum = mapper.Datum
