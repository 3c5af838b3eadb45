package udfserver

import (
	"errors"
	"io"

	"google.golang.org/grpc"
)

// Receiver reads a stream's requests in a goroutine of its own, so that a
// handler can wait for the next request and for user code at the same time.
// The goroutine ends at the end of the stream, or once the handler has
// returned (gRPC then cancels the stream).
type Receiver[Req any] struct {
	c   chan *Req
	err error
}

// Receive starts reading the requests of stream.
func Receive[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp]) *Receiver[Req] {
	r := &Receiver[Req]{c: make(chan *Req, receiveAhead)}
	done := stream.Context().Done()
	go func() {
		defer close(r.c)
		for {
			req, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					r.err = err
				}
				return
			}
			select { // the usual case, with room in the channel
			case r.c <- req:
				continue
			default:
			}
			select {
			case r.c <- req:
			case <-done:
				r.err = stream.Context().Err()
				return
			}
		}
	}()
	return r
}

// receiveAhead is how many requests the reader may take ahead of the handler.
const receiveAhead = 64

// C delivers the requests in order. It is closed when the stream ends.
func (r *Receiver[Req]) C() <-chan *Req { return r.c }

// Err is, once C is closed, why the stream ended: nil when the client
// closed its side, the receive error otherwise.
func (r *Receiver[Req]) Err() error { return r.err }
