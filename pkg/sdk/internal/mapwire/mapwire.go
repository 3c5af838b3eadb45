// Package mapwire is the map.v1 stream as the three map packages (mapper,
// batchmapper, mapstreamer) serve it: its requests decoded by hand into
// [Request], which is the Datum of its message, and its answers encoded by
// hand from the messages a map function returns ([NewResponse]). The wire is
// map.v1's MapRequest and MapResponse, field for field (mapwire_test.go
// compares them with the generated messages); the server's codec
// (protocodec) calls the encoding and decoding.
package mapwire

import (
	"sync"

	"google.golang.org/grpc"

	"github.com/sluiceflow/sluice/internal/protocodec"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// Stream is the stream of map.v1.Map/MapFn with its messages read as
// Requests and written as Responses.
type Stream = grpc.BidiStreamingServer[Request, Response]

// NewStream returns stream, whose server uses protocodec, as a Stream.
// Its Recv must not be called concurrently (nor may gRPC's).
func NewStream(stream mapv1.Map_MapFnServer) Stream { return &serverStream{ServerStream: stream} }

// requestSlab is how many Requests are allocated at once. A Request kept
// by user code keeps the others of its slab.
const requestSlab = 32

// serverStream is a Stream that decodes the requests into slabs of
// Requests.
type serverStream struct {
	grpc.ServerStream
	slab []Request
}

// Recv receives the next request.
func (s *serverStream) Recv() (*Request, error) {
	if len(s.slab) == 0 {
		s.slab = make([]Request, requestSlab)
	}
	r := &s.slab[0]
	if err := s.RecvMsg(r); err != nil {
		return nil, err
	}
	s.slab = s.slab[1:]
	return r, nil
}

// Send sends r.
func (s *serverStream) Send(r *Response) error { return s.SendMsg(r) }

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
	r := new(Response)
	SetResponse(r, id, msgs)
	return r
}

// responses are Responses for reuse, by GetResponse and Response.Sent.
var responses = sync.Pool{New: func() any { return new(Response) }}

// GetResponse returns the answer to request id with msgs, like NewResponse,
// but from a pool: its Sent method, called once the answer has been sent
// (as ServeConcurrent does), hands it back for reuse.
func GetResponse[M Message](id string, msgs []M) *Response {
	r := responses.Get().(*Response)
	SetResponse(r, id, msgs)
	r.pooled = true
	return r
}

// Sent tells r that it has been sent: an answer from GetResponse goes back
// to the pool, and must not be used again. Other answers are left alone.
func (r *Response) Sent() {
	if !r.pooled {
		return
	}
	clear(r.results) // what it shared with the messages
	*r = Response{results: r.results[:0]}
	responses.Put(r)
}

// SetResponse makes r the answer to request id with msgs, reusing what r
// holds: a Response can be sent again and again, set anew each time.
func SetResponse[M Message](r *Response, id string, msgs []M) {
	results := r.results
	switch {
	case len(msgs) <= 1:
		results = r.one[:len(msgs)]
	case cap(results) >= len(msgs) && &results[:1][0] != &r.one[0]:
		results = results[:len(msgs)]
	default:
		results = make([]result, len(msgs))
	}
	r.id, r.results, r.handshake, r.eot, r.pooled = id, results, false, false, false
	for i := range msgs {
		setResult(&r.results[i], msgs[i])
	}
}
