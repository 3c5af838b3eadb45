package sourcetransformer

import (
	"slices"
	"time"
)

// DropTag is the tag that marks a message to drop: the literal text
// "U+005C__DROP__", as Numaflow's protocol has it.
const DropTag = "U+005C__DROP__"

// Message is one output message of a transformer. Build it with NewMessage
// or MessageToDrop; the With methods return modified copies.
type Message struct {
	value     []byte
	eventTime time.Time
	keys      []string
	tags      []string
}

// Messages are the output of one call of a transformer.
type Messages []Message

// NewMessage returns a message with payload value and event time eventTime
// (pass the Datum's EventTime to keep it), no keys and no tags.
func NewMessage(value []byte, eventTime time.Time) Message {
	return Message{value: value, eventTime: eventTime}
}

// MessageToDrop returns a message that tells the runtime to drop its input.
// eventTime is still used by the runtime for watermark progress; pass the
// Datum's EventTime.
func MessageToDrop(eventTime time.Time) Message {
	return Message{eventTime: eventTime, tags: []string{DropTag}}
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

// Value is the message's payload.
func (m Message) Value() []byte { return m.value }

// EventTime is the message's event time.
func (m Message) EventTime() time.Time { return m.eventTime }

// Keys are the message's keys.
func (m Message) Keys() []string { return m.keys }

// Tags are the message's tags.
func (m Message) Tags() []string { return m.tags }

// IsDrop reports whether m marks its input to drop.
func (m Message) IsDrop() bool { return slices.Contains(m.tags, DropTag) }
