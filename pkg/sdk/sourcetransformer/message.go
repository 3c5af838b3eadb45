package sourcetransformer

import (
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// DropTag is the tag that marks a message to drop: the literal text
// "U+005C__DROP__", as Numaflow's protocol has it.
const DropTag = "U+005C__DROP__"

// NackTag is the tag that marks a message as a negative acknowledgement of
// its input: the literal text "U+005C__NACK__", as Numaflow's protocol has
// it.
const NackTag = nack.Tag

// FailTag is the tag that marks a message as a failure of its input: the
// literal text "U+005C__FAIL__", as Numaflow's protocol has it. See
// MessageToFail.
const FailTag = "U+005C__FAIL__"

// NackOptions tell the runtime how to redeliver a nacked message: after
// Delay milliseconds, at most MaxDeliveries times, with a Reason for the
// logs and free-form values in NackMap. Every field is optional; nil means
// the runtime's default.
type NackOptions = nack.Options

// UserMetadata is the metadata user code attaches to a message: named
// groups of keys with values of bytes, read from the input with
// Datum.UserMetadata and set on an output with Message.WithUserMetadata.
// The runtime does not carry it from input to output by itself. The zero
// value is empty and ready to use; a nil *UserMetadata reads as empty.
type UserMetadata = metadata.UserMetadata

// NewUserMetadata returns an empty UserMetadata.
func NewUserMetadata() *UserMetadata { return metadata.NewUserMetadata() }

// Message is one output message of a transformer. Build it with
// NewMessage, MessageToDrop or MessageToNack; the With methods return
// modified copies.
type Message struct {
	value     []byte
	eventTime time.Time
	keys      []string
	tags      []string
	metadata  *UserMetadata
	nack      *NackOptions
}

// Messages are the output of one call of a transformer.
type Messages []Message

// NewMessage returns a message with payload value and event time eventTime
// (pass the Datum's EventTime to keep it), no keys, no tags and no user
// metadata.
func NewMessage(value []byte, eventTime time.Time) Message {
	return Message{value: value, eventTime: eventTime}
}

// MessageToDrop returns a message that tells the runtime to drop its input.
// eventTime is still used by the runtime for watermark progress; pass the
// Datum's EventTime.
func MessageToDrop(eventTime time.Time) Message {
	return Message{eventTime: eventTime, tags: []string{DropTag}}
}

// MessageToNack returns a message that negatively acknowledges its input:
// the runtime does not forward it but has the source deliver it again, as
// opts say (nil: with the runtime's defaults). It carries NackTag and the
// options (which it does not copy). As with MessageToDrop, pass the Datum's
// EventTime. Return it as the only message.
func MessageToNack(eventTime time.Time, opts *NackOptions) Message {
	return Message{eventTime: eventTime, tags: []string{NackTag}, nack: opts}
}

// MessageToFail returns a message that says the transformer failed its
// input: the runtime does not forward anything of it but calls the
// transformer with it again, after the backoff of the source's
// transformer.retryStrategy, until a call does not fail it or, with
// onFailure drop, its steps are spent and the input is dropped. It carries
// FailTag; pass the Datum's EventTime. Return it as the only message.
func MessageToFail(eventTime time.Time) Message {
	return Message{eventTime: eventTime, tags: []string{FailTag}}
}

// WithKeys returns a copy of m with keys keys (which it does not copy).
func (m Message) WithKeys(keys []string) Message {
	m.keys = keys
	return m
}

// WithTags returns a copy of m with tags tags (which it does not copy).
func (m Message) WithTags(tags []string) Message {
	m.tags = tags
	return m
}

// WithEventTime returns a copy of m with event time t.
func (m Message) WithEventTime(t time.Time) Message {
	m.eventTime = t
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

// EventTime is the message's event time.
func (m Message) EventTime() time.Time { return m.eventTime }

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
