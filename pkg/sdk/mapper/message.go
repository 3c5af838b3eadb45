package mapper

import (
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// DropTag is the tag that marks a message to drop: the literal text
// "U+005C__DROP__" (the code point of a backslash written out, then
// "__DROP__"), as Numaflow's protocol has it.
const DropTag = "U+005C__DROP__"

// NackTag is the tag that marks a message as a negative acknowledgement of
// its input: the literal text "U+005C__NACK__", as Numaflow's protocol has
// it.
const NackTag = nack.Tag

// RateLimitedTag is the tag that marks a message as a throttle signal: the
// literal text "U+005C__RATE_LIMITED__", sluice's own. See
// MessageRateLimited.
const RateLimitedTag = nack.RateLimitedTag

// FailTag is the tag that marks a message as a failure of its input: the
// literal text "U+005C__FAIL__", as Numaflow's protocol has it. See
// MessageToFail.
const FailTag = "U+005C__FAIL__"

// NackOptions tell the runtime how to redeliver a nacked message: after
// Delay milliseconds, at most MaxDeliveries times, with a Reason for the
// logs and free-form values in NackMap. Every field is optional; nil means
// the runtime's default.
type NackOptions = nack.Options

// Message is one output message of a map function. Build it with
// NewMessage, MessageToDrop or MessageToNack; the With methods return
// modified copies.
type Message struct {
	value    []byte
	keys     []string
	tags     []string
	metadata *UserMetadata
	nack     *NackOptions
}

// Messages are the output of one call of a map function.
type Messages []Message

// NewMessage returns a message with payload value, no keys, no tags and no
// user metadata.
func NewMessage(value []byte) Message {
	return Message{value: value}
}

// MessageToDrop returns a message that tells the runtime to drop its input:
// it carries DropTag and nothing else.
func MessageToDrop() Message {
	return Message{tags: []string{DropTag}}
}

// MessageToNack returns a message that negatively acknowledges its input:
// the runtime does not forward the input but has it delivered again, as
// opts say (nil: with the runtime's defaults). It carries NackTag and the
// options (which it does not copy). Return it as the only message.
func MessageToNack(opts *NackOptions) Message {
	return Message{tags: []string{NackTag}, nack: opts}
}

// MessageToFail returns a message that says the function failed its input:
// the runtime does not forward anything of it but calls the function with
// it again, after the backoff of the vertex's udf.retryStrategy, until a
// call does not fail it or, with onFailure drop, its steps are spent and the
// input is dropped. It carries FailTag. Return it as the only message.
func MessageToFail() Message {
	return Message{tags: []string{FailTag}}
}

// MessageRateLimited returns a message that says the function could not
// handle its input because what it calls is rate limited, and asked to be
// left alone for retryAfter (0 when it did not say). The runtime does not
// forward the input but hands it back to be delivered again after
// retryAfter, as a nack with that delay, and counts a throttle signal
// (mapRateLimited): with rateLimit.adaptive, the vertex's limit is cut for
// every replica. It carries RateLimitedTag. Return it as the only message.
func MessageRateLimited(retryAfter time.Duration) Message {
	return Message{tags: []string{RateLimitedTag}, nack: nack.RetryAfter(retryAfter)}
}

// WithKeys returns a copy of m with keys keys (which it does not copy).
func (m Message) WithKeys(keys []string) Message {
	m.keys = keys
	return m
}

// WithTags returns a copy of m with tags tags (which it does not copy). Tags
// select the outgoing edges whose conditions name them.
func (m Message) WithTags(tags []string) Message {
	m.tags = tags
	return m
}

// WithUserMetadata returns a copy of m with a copy of md as its user
// metadata (nil: none), so that changing md afterwards does not change m.
// To pass the input's user metadata on, which the runtime does not do by
// itself, give the Datum's: m.WithUserMetadata(d.UserMetadata()).
func (m Message) WithUserMetadata(md *UserMetadata) Message {
	m.metadata = nil
	if md != nil {
		m.metadata = md.Clone()
	}
	return m
}

// Value is the message's payload.
func (m Message) Value() []byte { return m.value }

// Keys are the message's keys.
func (m Message) Keys() []string { return m.keys }

// Tags are the message's tags.
func (m Message) Tags() []string { return m.tags }

// UserMetadata is the message's user metadata; nil if it has none. Do not
// change it: use WithUserMetadata.
func (m Message) UserMetadata() *UserMetadata { return m.metadata }

// NackOptions are the options of a message built by MessageToNack; nil
// otherwise, or if it was given none.
func (m Message) NackOptions() *NackOptions { return m.nack }

// IsDrop reports whether m marks its input to drop.
func (m Message) IsDrop() bool { return slices.Contains(m.tags, DropTag) }

// IsNack reports whether m negatively acknowledges its input.
func (m Message) IsNack() bool { return slices.Contains(m.tags, NackTag) }

// IsRateLimited reports whether m says its input met a rate limit.
func (m Message) IsRateLimited() bool { return slices.Contains(m.tags, RateLimitedTag) }
