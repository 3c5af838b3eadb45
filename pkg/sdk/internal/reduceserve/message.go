package reduceserve

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
)

// DropTag is the tag that marks a result to drop: the literal text
// "U+005C__DROP__", as Numaflow's protocol has it.
const DropTag = "U+005C__DROP__"

// Datum is one input message of a window.
type Datum interface {
	// Value is the payload.
	Value() []byte
	// EventTime is the message's event time; zero if it has none.
	EventTime() time.Time
	// Watermark is the vertex's watermark when the message was read; zero
	// if unknown.
	Watermark() time.Time
	// Headers are the message's headers.
	Headers() map[string]string
	// UserMetadata is a copy of the message's user metadata, never nil.
	UserMetadata() *metadata.UserMetadata
}

// IntervalWindow is the window [Start, End) of event time a reduce
// function is called for.
type IntervalWindow struct {
	Start, End time.Time
}

// Metadata tells a reduce function about its call.
type Metadata struct {
	// IntervalWindow is the window the messages belong to.
	IntervalWindow IntervalWindow
}

// Message is one result of a reduce function. Build it with NewMessage or
// MessageToDrop; the With methods return modified copies.
type Message struct {
	value    []byte
	keys     []string
	tags     []string
	metadata *metadata.UserMetadata
}

// NewMessage returns a message with payload value, no keys, no tags and no
// user metadata.
func NewMessage(value []byte) Message { return Message{value: value} }

// MessageToDrop returns a message the runtime drops: it carries DropTag and
// nothing else.
func MessageToDrop() Message { return Message{tags: []string{DropTag}} }

// WithKeys returns a copy of m with keys keys.
func (m Message) WithKeys(keys []string) Message { m.keys = keys; return m }

// WithTags returns a copy of m with tags tags, which conditional forwarding
// matches.
func (m Message) WithTags(tags []string) Message { m.tags = tags; return m }

// WithUserMetadata returns a copy of m that carries a copy of md.
func (m Message) WithUserMetadata(md *metadata.UserMetadata) Message {
	m.metadata = md.Clone()
	return m
}

// Value is the payload.
func (m Message) Value() []byte { return m.value }

// Keys are the message's keys.
func (m Message) Keys() []string { return m.keys }

// Tags are the message's tags.
func (m Message) Tags() []string { return m.tags }

// UserMetadata is the message's user metadata; nil if it has none.
func (m Message) UserMetadata() *metadata.UserMetadata { return m.metadata }
