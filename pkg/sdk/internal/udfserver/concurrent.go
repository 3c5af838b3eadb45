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
// to the others. Handlers hand their answers to one sending goroutine, in the
// order they give them. When the client closes its side, ServeConcurrent
// waits for the requests in flight to be answered and returns nil; when a
// handler fails or the stream breaks, it cancels the other handlers, waits for
// them and returns the error. It never sends after it has returned.
func ServeConcurrent[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp], handle Handler[Req, Resp]) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)

	var (
		mu      sync.Mutex // guards closed and workers.Add
		closed  bool       // no more handlers
		workers sync.WaitGroup
	)
	// The sender: one goroutine owns stream.Send, so that handlers neither
	// queue on a lock nor grow their stacks through the transport.
	out := make(chan *Resp, sendQueue)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		var broken bool
		for resp := range out {
			// What a handler handed over before a failure is still sent.
			if broken {
				continue
			}
			if err := stream.Send(resp); err != nil {
				broken = true
				cancel(err)
			}
		}
	}()
	send := func(resp *Resp) error {
		if ctx.Err() != nil {
			return errClosed
		}
		select {
		case out <- resp:
			return nil
		case <-ctx.Done():
			return errClosed
		}
	}
	// A request goes to an idle worker, or to a new one when all are busy:
	// every request in flight has a goroutine, but goroutines are reused.
	idle := make(chan *Req)
	work := func(req *Req) {
		for ok := true; ok; req, ok = <-idle {
			if err := handle(ctx, req, send); err != nil {
				cancel(err)
			}
			workers.Done()
		}
	}
	recvErr := make(chan error, 1)
	go func() {
		defer close(idle) // idle workers return
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
			select {
			case idle <- req:
			default:
				go work(req)
			}
		}
	}()

	select {
	case err := <-recvErr:
		if !errors.Is(err, io.EOF) {
			cancel(err)
		}
		// On EOF the client is done sending: answer what is in flight.
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		mu.Lock()
		closed = true
		mu.Unlock()
	}
	workers.Wait() // every request answered or abandoned
	close(out)
	<-sent
	return context.Cause(ctx)
}

// sendQueue is how many answers may wait for the sender.
const sendQueue = 1024
