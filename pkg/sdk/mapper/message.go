package mapper

import "slices"

// DropTag is the tag that marks a message to drop: the literal text
// "U+005C__DROP__" (the code point of a backslash written out, then
// "__DROP__"), as Numaflow's protocol has it.
const DropTag = "U+005C__DROP__"

// Message is one output message of a map function. Build it with
// NewMessage or MessageToDrop; the With methods return modified copies.
type Message struct {
	value []byte
	keys  []string
	tags  []string
}

// Messages are the output of one call of a map function.
type Messages []Message

// NewMessage returns a message with payload value, no keys and no tags.
func NewMessage(value []byte) Message {
	return Message{value: value}
}

// MessageToDrop returns a message that tells the runtime to drop its input:
// it carries DropTag and nothing else.
func MessageToDrop() Message {
	return Message{tags: []string{DropTag}}
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

// Value is the message's payload.
func (m Message) Value() []byte { return m.value }

// Keys are the message's keys.
func (m Message) Keys() []string { return m.keys }

// Tags are the message's tags.
func (m Message) Tags() []string { return m.tags }

// IsDrop reports whether m marks its input to drop.
func (m Message) IsDrop() bool { return slices.Contains(m.tags, DropTag) }
