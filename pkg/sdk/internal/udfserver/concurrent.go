package udfserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

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

// ServeConcurrent serves the requests of stream, after its handshake,
// concurrently, so that a slow request does not delay the answers to the
// others: while handlers are quick (under inlineBelow on average), the
// goroutine that receives the requests handles them itself, without handing
// each over to another goroutine, and a handler that takes long there (a
// tick or two of takeoverTick) hands the receiving on to a new goroutine;
// otherwise each request in flight has a goroutine of its own (goroutines
// are reused). Handlers hand their answers to one sending goroutine, in the
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
	go c.watchdog()
	go c.receive()

	recvDone := c.awaitEnd()
	c.stopWatchdog() // no more hand-overs of the receiving
	c.stop()
	c.requests.Wait() // every request answered or abandoned
	c.workers.Wait()
	close(c.out)
	<-sent
	if recvDone {
		<-c.received
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
	workers  sync.WaitGroup // worker goroutines, and receivers that handed the receiving on
	// The goroutine receiving requests reports why Recv failed on recvErr,
	// and closes received when it returns; a goroutine that handed the
	// receiving on does neither.
	recvErr  chan error
	received chan struct{}
	inline   inline // the handling of requests by the receiving goroutine
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
		idle: make(chan *Req), out: make(chan *Resp, sendQueue),
		recvErr: make(chan error, 1), received: make(chan struct{}), inline: newInline()}
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

// receive receives and dispatches the stream's requests until Recv fails,
// which it reports on recvErr, until c is stopped, or until, in a handler
// it runs itself, the watchdog hands the receiving on to another goroutine.
func (c *concurrent[Req, Resp]) receive() {
	for n := 1; ; n++ {
		req, err := c.stream.Recv()
		if err != nil {
			c.recvErr <- err
			close(c.received)
			return
		}
		taken, inline := c.dispatch(req)
		if !taken {
			close(c.received)
			return
		}
		if inline && !c.runInline(req, n%timeEvery == 0) {
			return
		}
	}
}

// dispatch takes req: for the caller to handle it itself (inline) while
// handlers are quick, else it hands it to an idle worker, or to a new one
// when all are busy. It returns false, and drops req, once c is stopped.
func (c *concurrent[Req, Resp]) dispatch(req *Req) (taken, inline bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, false
	}
	c.requests.Add(1)
	if c.inline.quick() {
		return true, true
	}
	select {
	case c.idle <- req:
	default:
		c.workers.Add(1)
		go c.work(req)
	}
	return true, false
}

// runInline runs req's handler in the receiving goroutine. It reports
// whether the goroutine is still the one receiving: false once the watchdog
// has handed the receiving on (and counted this goroutine as a worker, which
// returns now).
func (c *concurrent[Req, Resp]) runInline(req *Req, timed bool) bool {
	c.inline.begin()
	c.run(req, timed)
	if c.inline.end() {
		return true
	}
	c.workers.Done()
	return false
}

// work handles req, then the requests idle brings, until idle is closed.
func (c *concurrent[Req, Resp]) work(req *Req) {
	defer c.workers.Done()
	for n, ok := 0, true; ok; req, ok = <-c.idle {
		c.run(req, n%timeEvery == 0)
		n++
	}
}

// timeEvery is how often a goroutine times the handler it runs: one
// handler in timeEvery (reading the clock costs more than a quick handler
// takes).
const timeEvery = 16

// run handles req, timing the handler when timed. A handler's error cancels
// the stream.
func (c *concurrent[Req, Resp]) run(req *Req, timed bool) {
	var start time.Time
	if timed {
		start = time.Now()
	}
	if err := c.handle(c.ctx, req, c.send); err != nil {
		c.cancel(err)
	}
	if timed {
		c.inline.observe(time.Since(start))
	}
	c.requests.Done()
}

// watchdog hands the receiving on to a new goroutine when a handler run by
// the receiving goroutine takes long, until stopWatchdog.
func (c *concurrent[Req, Resp]) watchdog() {
	c.inline.watch(func() bool {
		c.workers.Add(1) // the goroutine in the handler, from now on
		if !c.inline.takeOver() {
			c.workers.Done() // the handler returned meanwhile
			return false
		}
		c.inline.observe(takeoverTick) // whether or not it was timed
		go c.receive()
		return true
	})
}

// stopWatchdog stops the watchdog and waits for it to return.
func (c *concurrent[Req, Resp]) stopWatchdog() { c.inline.stop() }

// awaitEnd waits until the client closes its side (io.EOF: the requests in
// flight are still answered), the stream breaks, or a handler or a send
// fails. It reports whether the receiving goroutine's Recv has returned, so
// that the goroutine is returning.
func (c *concurrent[Req, Resp]) awaitEnd() (recvDone bool) {
	select {
	case err := <-c.recvErr:
		if !errors.Is(err, io.EOF) {
			c.cancel(err)
		}
		return true
	case <-c.ctx.Done():
	}
	select {
	case <-c.recvErr: // the stream broke too
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
