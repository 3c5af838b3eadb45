package udfserver

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errClosed is what send returns to a handler that answers after the stream
// has failed.
var errClosed = status.Error(codes.Canceled, "stream closed")

// Handler answers one request through send, which is safe to call from
// several handlers at once. A handler error ends the whole stream with that
// error, and cancels ctx for the other handlers.
type Handler[Req, Resp any] func(ctx context.Context, req *Req, send func(*Resp) error) error

// ServeConcurrent serves the requests of stream, after its handshake, each in
// a goroutine of its own, so that a slow request does not delay the answers
// to the others. When the client closes its side, ServeConcurrent waits for
// the requests in flight to be answered and returns nil; when a handler
// fails or the stream breaks, it cancels the other handlers, waits for them
// and returns the error. It never sends after it has returned.
func ServeConcurrent[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp], handle Handler[Req, Resp]) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)

	var (
		mu      sync.Mutex // serialises Send; guards closed and wg.Add
		closed  bool       // no more handlers, no more sends
		workers sync.WaitGroup
	)
	send := func(resp *Resp) error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return errClosed
		}
		return stream.Send(resp)
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				return
			}
			workers.Add(1)
			mu.Unlock()
			go func() {
				defer workers.Done()
				if err := handle(ctx, req, send); err != nil {
					cancel(err)
				}
			}()
		}
	}()

	select {
	case err := <-recvErr:
		if errors.Is(err, io.EOF) {
			// The client is done sending: answer what is in flight.
			workers.Wait()
			return context.Cause(ctx)
		}
		cancel(err)
	case <-ctx.Done():
	}
	mu.Lock()
	closed = true
	mu.Unlock()
	workers.Wait()
	return context.Cause(ctx)
}
