package sessionreducer

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/reduceserve"
)

// SessionReducer is the reduce function of one session of one key set.
//
// SessionReduce is called once per session, in a goroutine of its own, as
// soon as the session opens: calls for different sessions run concurrently.
// It reads the session's messages from in until in is closed, when the
// runtime closes the session or merges it into another, and returns its
// results; the server sends them when the session closes, and drops them
// when it was merged. Accumulator is called after SessionReduce returns on
// a session being merged: it is the session's state, which
// MergeAccumulator of the merged session's new SessionReducer then takes in
// before its SessionReduce starts. A panic in any of them fails the stream
// with a gRPC Internal error and shuts the server down (see Server).
type SessionReducer interface {
	SessionReduce(ctx context.Context, keys []string, in <-chan Datum) Messages
	Accumulator(ctx context.Context) []byte
	MergeAccumulator(ctx context.Context, accumulator []byte)
}

// Creator makes a SessionReducer for each session; Create must be safe for
// concurrent use.
type Creator interface {
	Create() SessionReducer
}

// CreatorFunc adapts a function to the Creator interface.
type CreatorFunc func() SessionReducer

// Create calls f.
func (f CreatorFunc) Create() SessionReducer { return f() }

// Datum is one input message of a session: Value, EventTime, Watermark,
// Headers and UserMetadata (a copy, never nil). Its methods return the
// runtime's data, not copies: do not modify what they return.
type Datum = reduceserve.Datum

// Message is one result of a session reduce function. Build it with
// NewMessage or MessageToDrop; WithKeys, WithTags and WithUserMetadata
// return modified copies.
type Message = reduceserve.Message

// Messages are the results of one call of SessionReduce.
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
