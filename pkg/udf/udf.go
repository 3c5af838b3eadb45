// Package udf applies map functions to batches of messages: the built-ins (cat,
// filter) and, through the same [Mapper] interface, user-defined functions reached
// over gRPC. A source transformer is a Mapper too.
package udf

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Mapper applies a map function to a batch.
//
// Map appends to out the messages that in produces, in order, and returns out and
// how many messages of in were dropped: produced nothing because the function
// marked them to drop. A message may produce zero, one or many messages. Map keeps
// neither in nor out after it returns; the payloads of out may share memory with
// those of in. An error is for the whole batch, which may be retried.
//
// Every message produced carries the Origin of the message it came from. A
// function that rejects a message (a nack) produces, in its place, one
// message with Nack set and nothing else; such a message is not a drop.
type Mapper interface {
	Map(ctx context.Context, in []isb.Message, out []isb.Message) ([]isb.Message, int, error)
}
