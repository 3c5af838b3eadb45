package accumulator

import (
	"context"
	"time"
)

// Datum is one message fed to an accumulator.
type Datum interface {
	Value() []byte
	EventTime() time.Time
	// Watermark is the vertex's watermark when the runtime fed the datum.
	Watermark() time.Time
	Keys() []string
	Headers() map[string]string
	// ID identifies the message, for deduplication.
	ID() string
}

// Accumulator is the function of one key set: it reads in until it is
// closed, or ctx ends, and writes to out. It must not close out.
type Accumulator interface {
	Accumulate(ctx context.Context, in <-chan Datum, out chan<- Message)
}

// Creator makes the Accumulator of each key set.
type Creator interface {
	Create() Accumulator
}

// CreatorFunc is a function that is a Creator.
type CreatorFunc func() Accumulator

// Create calls f.
func (f CreatorFunc) Create() Accumulator { return f() }

// Message is what an accumulator emits.
type Message struct {
	value     []byte
	keys      []string
	tags      []string
	eventTime time.Time
	watermark time.Time
	id        string
	headers   map[string]string
}

// MessageFromDatum returns a message with d's value, keys, event time,
// watermark, ID and headers.
func MessageFromDatum(d Datum) Message {
	return Message{value: d.Value(), keys: d.Keys(), eventTime: d.EventTime(), watermark: d.Watermark(),
		id: d.ID(), headers: d.Headers()}
}

// WithKeys returns m with keys.
func (m Message) WithKeys(keys []string) Message { m.keys = keys; return m }

// WithTags returns m with tags, which route it along conditional edges.
func (m Message) WithTags(tags []string) Message { m.tags = tags; return m }

// WithValue returns m with value.
func (m Message) WithValue(v []byte) Message { m.value = v; return m }

// WithID returns m with id; keep the datum's unless you know better.
func (m Message) WithID(id string) Message { m.id = id; return m }

// Keys returns m's keys.
func (m Message) Keys() []string { return m.keys }

// Value returns m's value.
func (m Message) Value() []byte { return m.value }

// Tags returns m's tags.
func (m Message) Tags() []string { return m.tags }

type datum struct {
	value         []byte
	eventTime, wm time.Time
	keys          []string
	headers       map[string]string
	id            string
}

func (d *datum) Value() []byte              { return d.value }
func (d *datum) EventTime() time.Time       { return d.eventTime }
func (d *datum) Watermark() time.Time       { return d.wm }
func (d *datum) Keys() []string             { return d.keys }
func (d *datum) Headers() map[string]string { return d.headers }
func (d *datum) ID() string                 { return d.id }
