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
//
// Every goroutine it starts has returned by then, but one: after a handler or
// a send failed, the goroutine receiving requests may still be waiting in
// Recv, which only a request or the end of the RPC (ServeConcurrent's caller
// returning) ends; it then returns without handling anything more.
func ServeConcurrent[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp], handle Handler[Req, Resp]) error {
	c := newConcurrent(stream, handle)
	defer c.cancel(nil)
	sent := make(chan struct{})
	go c.sendAll(sent)
	recvErr, received := make(chan error, 1), make(chan struct{})
	go c.receive(recvErr, received)

	recvDone := c.awaitEnd(recvErr)
	c.stop()
	c.requests.Wait() // every request answered or abandoned
	c.workers.Wait()
	close(c.out)
	<-sent
	if recvDone {
		<-received
	}
	return context.Cause(c.ctx)
}

// concurrent is one stream served by ServeConcurrent.
type concurrent[Req, Resp any] struct {
	stream grpc.BidiStreamingServer[Req, Resp]
	handle Handler[Req, Resp]
	send   func(*Resp) error // c.hand, made once
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex     // guards closed, requests.Add, workers.Add and sends on idle
	closed   bool           // no more requests are taken; idle is closed
	requests sync.WaitGroup // requests in flight
	workers  sync.WaitGroup // worker goroutines
	// idle takes a request to a worker waiting for one: every request in
	// flight has a goroutine, but goroutines are reused.
	idle chan *Req
	// out takes the answers to the sender, which alone calls stream.Send, so
	// that handlers neither queue on a lock nor grow their stacks through the
	// transport.
	out chan *Resp
}

func newConcurrent[Req, Resp any](stream grpc.BidiStreamingServer[Req, Resp], handle Handler[Req, Resp]) *concurrent[Req, Resp] {
	ctx, cancel := context.WithCancelCause(stream.Context())
	c := &concurrent[Req, Resp]{stream: stream, handle: handle, ctx: ctx, cancel: cancel,
		idle: make(chan *Req), out: make(chan *Resp, sendQueue)}
	c.send = c.hand
	return c
}

// sendAll sends the answers handed over until out is closed, then closes
// sent. What a handler handed over before a failure is still sent; after a
// failed send, nothing is. An answer with a Sent method is told when the
// sender is done with it.
func (c *concurrent[Req, Resp]) sendAll(sent chan<- struct{}) {
	defer close(sent)
	broken := false
	for resp := range c.out {
		if !broken {
			if err := c.stream.Send(resp); err != nil {
				broken = true
				c.cancel(err)
			}
		}
		if s, ok := any(resp).(sentNotifier); ok {
			s.Sent()
		}
	}
}

// sentNotifier is an answer that is told when the sender is done with it
// (it was sent, or dropped after a failed send), so that it can be reused.
type sentNotifier interface{ Sent() }

// hand gives an answer to the sender; it is the send of every handler.
func (c *concurrent[Req, Resp]) hand(resp *Resp) error {
	if c.ctx.Err() != nil {
		return errClosed
	}
	select { // the usual case, with room in the queue: no select on ctx
	case c.out <- resp:
		return nil
	default:
	}
	select {
	case c.out <- resp:
		return nil
	case <-c.ctx.Done():
		return errClosed
	}
}

// receive dispatches the stream's requests until Recv fails, which it reports
// on recvErr, or until c is stopped. It closes received when it returns.
func (c *concurrent[Req, Resp]) receive(recvErr chan<- error, received chan<- struct{}) {
	defer close(received)
	for {
		req, err := c.stream.Recv()
		if err != nil {
			recvErr <- err
			return
		}
		if !c.dispatch(req) {
			return
		}
	}
}

// dispatch hands req to an idle worker, or to a new one when all are busy. It
// returns false, and drops req, once c is stopped.
func (c *concurrent[Req, Resp]) dispatch(req *Req) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.requests.Add(1)
	select {
	case c.idle <- req:
	default:
		c.workers.Add(1)
		go c.work(req)
	}
	return true
}

// work handles req, then the requests idle brings, until idle is closed. A
// handler's error cancels the stream.
func (c *concurrent[Req, Resp]) work(req *Req) {
	defer c.workers.Done()
	for ok := true; ok; req, ok = <-c.idle {
		if err := c.handle(c.ctx, req, c.send); err != nil {
			c.cancel(err)
		}
		c.requests.Done()
	}
}

// awaitEnd waits until the client closes its side (io.EOF: the requests in
// flight are still answered), the stream breaks, or a handler or a send
// fails. It reports whether the receiving goroutine's Recv has returned, so
// that the goroutine is returning.
func (c *concurrent[Req, Resp]) awaitEnd(recvErr <-chan error) (recvDone bool) {
	select {
	case err := <-recvErr:
		if !errors.Is(err, io.EOF) {
			c.cancel(err)
		}
		return true
	case <-c.ctx.Done():
	}
	select {
	case <-recvErr: // the stream broke too
		return true
	default: // Recv waits for the end of the RPC
		return false
	}
}

// stop takes no more requests and lets idle workers return.
func (c *concurrent[Req, Resp]) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	close(c.idle)
}

// sendQueue is how many answers may wait for the sender.
const sendQueue = 1024
