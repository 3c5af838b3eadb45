package batchmapper

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// Message is one output message; see mapper.Message.
type Message = mapper.Message

// Messages are the output messages for one input message.
type Messages = mapper.Messages

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

// BatchResponse is the answer to one datum of a batch: its ID and the
// messages it produced.
type BatchResponse struct {
	id       string
	messages Messages
}

// BatchResponses are the answers to a batch, one per datum.
type BatchResponses []BatchResponse

// NewBatchResponse returns the answer to the datum whose ID is id, with
// messages msgs (more may be appended).
func NewBatchResponse(id string, msgs ...Message) BatchResponse {
	return BatchResponse{id: id, messages: msgs}
}

// Append returns r with msgs added to its messages.
func (r BatchResponse) Append(msgs ...Message) BatchResponse {
	r.messages = append(r.messages, msgs...)
	return r
}

// ID is the ID of the datum r answers.
func (r BatchResponse) ID() string { return r.id }

// Messages are the messages of r.
func (r BatchResponse) Messages() Messages { return r.messages }
