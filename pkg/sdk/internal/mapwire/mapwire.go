// Package mapwire is the map.v1 stream as the three map packages (mapper,
// batchmapper, mapstreamer) serve it: its requests decoded by hand into
// [Request], which is the Datum of its message, and its answers encoded by
// hand from the messages a map function returns ([NewResponse]). The wire is
// map.v1's MapRequest and MapResponse, field for field (mapwire_test.go
// compares them with the generated messages); the server's codec
// (protocodec) calls the encoding and decoding.
package mapwire

import (
	"google.golang.org/grpc"

	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/protocodec"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// Stream is the stream of map.v1.Map/MapFn with its messages read as
// Requests and written as Responses.
type Stream = grpc.BidiStreamingServer[Request, Response]

// NewStream returns stream, whose server uses protocodec, as a Stream.
func NewStream(stream mapv1.Map_MapFnServer) Stream {
	return &grpc.GenericServerStream[Request, Response]{ServerStream: stream}
}

var (
	_ protocodec.Unmarshaler = (*Request)(nil)
	_ protocodec.Marshaler   = (*Response)(nil)
)

// IsHandshake reports whether r is the start-of-transmission handshake.
func IsHandshake(r *Request) bool { return r.handshake }

// HandshakeEcho is the answer to the handshake.
func HandshakeEcho() *Response { return &Response{handshake: true} }

// EOT is the end-of-transmission response; id is the request's for a map
// stream, empty for the end of a batch.
func EOT(id string) *Response { return &Response{id: id, eot: true} }

// IsEOT reports whether r carries status{eot: true}.
func IsEOT(r *Request) bool { return r.eot }

// Message is what a map function returns, as mapper.Message exposes it.
type Message interface {
	Keys() []string
	Value() []byte
	Tags() []string
	UserMetadata() *metadata.UserMetadata
	NackOptions() *nack.Options
}

// NewResponse returns the answer to request id with msgs, in one allocation
// for the usual single message.
func NewResponse[M Message](id string, msgs []M) *Response {
	r := &Response{id: id}
	switch len(msgs) {
	case 0:
	case 1:
		r.results = r.one[:]
	default:
		r.results = make([]result, len(msgs))
	}
	for i, m := range msgs {
		r.results[i].set(m)
	}
	return r
}
