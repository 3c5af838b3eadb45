// Package mapwire converts between map.v1 protocol messages and the values
// the three map packages (mapper, batchmapper, mapstreamer) share.
package mapwire

import (
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
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

// Datum is the message of r; r.Request must be set.
func Datum(r *mapv1.MapRequest) *wire.Datum {
	m := r.GetRequest()
	return wire.NewDatum(wire.DatumFields{
		ID:        r.GetId(),
		Keys:      m.GetKeys(),
		Value:     m.GetValue(),
		EventTime: wire.Time(m.GetEventTime()),
		Watermark: wire.Time(m.GetWatermark()),
		Headers:   m.GetHeaders(),
	})
}

// Message is what a map function returns, as mapper.Message exposes it.
type Message interface {
	Keys() []string
	Value() []byte
	Tags() []string
}

// Results converts the messages a map function returned.
func Results[M Message](msgs []M) []*mapv1.MapResponse_Result {
	out := make([]*mapv1.MapResponse_Result, len(msgs))
	for i, m := range msgs {
		out[i] = Result(m)
	}
	return out
}

// Result converts one message.
func Result(m Message) *mapv1.MapResponse_Result {
	return &mapv1.MapResponse_Result{Keys: m.Keys(), Value: m.Value(), Tags: m.Tags()}
}
