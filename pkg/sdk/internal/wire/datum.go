package wire

import (
	"time"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
)

// Datum is one request message as the SDK packages hand it to user code.
// It has every accessor their Datum interfaces ask for, so that each package
// declares only the subset it documents. A Datum is immutable once built.
type Datum struct {
	id        string
	keys      []string
	value     []byte
	eventTime time.Time
	watermark time.Time
	headers   map[string]string
	metadata  *common.Metadata
}

// DatumFields are the parts of a Datum, named so that call sites read well.
type DatumFields struct {
	ID        string
	Keys      []string
	Value     []byte
	EventTime time.Time
	Watermark time.Time
	Headers   map[string]string
	Metadata  *common.Metadata // the request's; may be nil
}

// NewDatum builds a Datum from its fields.
func NewDatum(f DatumFields) *Datum {
	return &Datum{
		id:        f.ID,
		keys:      f.Keys,
		value:     f.Value,
		eventTime: f.EventTime,
		watermark: f.Watermark,
		headers:   f.Headers,
		metadata:  f.Metadata,
	}
}

// ID is the identifier the runtime gave the message.
func (d *Datum) ID() string { return d.id }

// Keys are the message's keys.
func (d *Datum) Keys() []string { return d.keys }

// Value is the message's payload.
func (d *Datum) Value() []byte { return d.value }

// EventTime is the message's event time (zero if the runtime sent none).
func (d *Datum) EventTime() time.Time { return d.eventTime }

// Watermark is the watermark when the message was read (zero if the runtime
// sent none).
func (d *Datum) Watermark() time.Time { return d.watermark }

// Headers are the message's headers.
func (d *Datum) Headers() map[string]string { return d.headers }

// UserMetadata is a copy of the message's user metadata, never nil.
func (d *Datum) UserMetadata() *metadata.UserMetadata { return metadata.FromProto(d.metadata) }
