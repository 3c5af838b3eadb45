// Package mapwire converts between map.v1 protocol messages and the values
// the three map packages (mapper, batchmapper, mapstreamer) share.
package mapwire

import (
	"time"

	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/wire"
)

// IsHandshake reports whether r is the start-of-transmission handshake.
func IsHandshake(r *mapv1.MapRequest) bool { return r.GetHandshake().GetSot() }

// HandshakeEcho is the answer to the handshake.
func HandshakeEcho() *mapv1.MapResponse {
	return &mapv1.MapResponse{Handshake: &mapv1.Handshake{Sot: true}}
}

// EOT is the end-of-transmission response; id is the request's for a map
// stream, empty for the end of a batch.
func EOT(id string) *mapv1.MapResponse {
	return &mapv1.MapResponse{Id: id, Status: &mapv1.TransmissionStatus{Eot: true}}
}

// IsEOT reports whether r carries status{eot: true}.
func IsEOT(r *mapv1.MapRequest) bool { return r.GetStatus().GetEot() }

// Datum is the message of r, seen through the accessors of the map packages'
// Datum interfaces without a copy; r.Request must be set, and r must not
// change afterwards.
func Datum(r *mapv1.MapRequest) *RequestDatum { return (*RequestDatum)(r) }

// RequestDatum is a map request as a Datum.
type RequestDatum mapv1.MapRequest

func (d *RequestDatum) req() *mapv1.MapRequest_Request { return (*mapv1.MapRequest)(d).GetRequest() }

// ID identifies the message within the runtime.
func (d *RequestDatum) ID() string { return (*mapv1.MapRequest)(d).GetId() }

// Keys are the message's keys.
func (d *RequestDatum) Keys() []string { return d.req().GetKeys() }

// Value is the message's payload.
func (d *RequestDatum) Value() []byte { return d.req().GetValue() }

// EventTime is the message's event time (zero if the runtime sent none).
func (d *RequestDatum) EventTime() time.Time { return wire.Time(d.req().GetEventTime()) }

// Watermark is the watermark when the message was read (zero if the runtime
// sent none).
func (d *RequestDatum) Watermark() time.Time { return wire.Time(d.req().GetWatermark()) }

// Headers are the message's headers.
func (d *RequestDatum) Headers() map[string]string { return d.req().GetHeaders() }

// UserMetadata is a copy of the message's user metadata, never nil.
func (d *RequestDatum) UserMetadata() *metadata.UserMetadata {
	return metadata.FromProto(d.req().GetMetadata())
}

// Message is what a map function returns, as mapper.Message exposes it.
type Message interface {
	Keys() []string
	Value() []byte
	Tags() []string
	UserMetadata() *metadata.UserMetadata
	NackOptions() *nack.Options
}

// Results converts the messages a map function returned.
func Results[M Message](msgs []M) []*mapv1.MapResponse_Result {
	out := make([]*mapv1.MapResponse_Result, len(msgs))
	for i, m := range msgs {
		out[i] = Result(m)
	}
	return out
}

// Response is the answer to request id with msgs, in as few allocations as
// possible: one for the usual single message.
func Response[M Message](id string, msgs []M) *mapv1.MapResponse {
	if len(msgs) != 1 {
		return &mapv1.MapResponse{Id: id, Results: Results(msgs)}
	}
	one := &struct {
		resp mapv1.MapResponse
		ptr  [1]*mapv1.MapResponse_Result
		res  mapv1.MapResponse_Result
	}{}
	fill(&one.res, msgs[0])
	one.ptr[0] = &one.res
	one.resp.Id, one.resp.Results = id, one.ptr[:]
	return &one.resp
}

// Result converts one message.
func Result(m Message) *mapv1.MapResponse_Result {
	r := new(mapv1.MapResponse_Result)
	fill(r, m)
	return r
}

// fill sets the fields of r from m. Like numaflow-go, every result carries a
// metadata, empty when m has no user metadata; nack options go only with the
// messages that have them.
func fill(r *mapv1.MapResponse_Result, m Message) {
	r.Keys, r.Value, r.Tags = m.Keys(), m.Value(), m.Tags()
	r.Metadata = metadata.ToProto(m.UserMetadata())
	r.NackOptions = nack.ToProto(m.NackOptions())
}
