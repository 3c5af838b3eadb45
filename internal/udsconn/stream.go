package udsconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Stream is a bidirectional stream to a UDF server: opened on demand with the
// start-of-transmission handshake, reused exchange after exchange on the
// connection it was opened on, and opened again on the current connection once
// that one was dropped. After an error it is dropped, together with its
// connection if that is still the current one, so that the next exchange starts
// afresh. A Stream carries one exchange at a time, and each exchange is a
// call with a deadline (see the package doc, Deadlines).
type Stream[Req, Resp any] struct {
	conn *Conn
	// Name names the stream's calls in logs and status: its RPC, such as
	// MapFn or ReadFn.
	Name string
	// Allowance is how long an exchange may take by design (a source's
	// read waits up to its read timeout for records): its deadline, and its
	// first warning, come that much later.
	Allowance time.Duration
	// Open opens the stream on a connection.
	Open func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[Req, Resp], error)
	// Handshake is the first request of a stream; Echoed checks the server's
	// answer to it.
	Handshake func() *Req
	Echoed    func(*Resp) bool
	// Grace is how long the server has, once the stream is half-closed (its
	// exchange's context ended, or Close), to finish the exchange in flight
	// and end the stream before it is cancelled (default DefaultGrace).
	Grace time.Duration

	mu     sync.Mutex
	cur    *opened[Req, Resp]
	closed bool
}

// opened is a stream opened on the connection cc.
type opened[Req, Resp any] struct {
	cc     *grpc.ClientConn
	st     grpc.BidiStreamingClient[Req, Resp]
	ctx    context.Context // the stream's, done once it is cancelled
	cancel context.CancelFunc
	busy   bool // an exchange uses it; guarded by Stream.mu
}

// NewStream returns a stream on conn.
func NewStream[Req, Resp any](conn *Conn) *Stream[Req, Resp] { return &Stream[Req, Resp]{conn: conn} }

// ErrProtocol is matched by errors for answers that break the protocol.
var ErrProtocol = errors.New("UDF server broke the protocol")

// ErrServerFailed is matched by the error of an exchange that failed because
// the server did (its stream broke, the server went away or answered with a
// gRPC error), after which the connection was dropped to be made again; not
// by a break of the protocol, an abandoned call or the caller's context.
var ErrServerFailed = errors.New("UDF server failed")

// serverFailed is an error of the server's, matching ErrServerFailed and
// what its err matches, said as err.
type serverFailed struct{ err error }

func (e *serverFailed) Error() string        { return e.err.Error() }
func (e *serverFailed) Unwrap() error        { return e.err }
func (e *serverFailed) Is(target error) bool { return target == ErrServerFailed }

// failedBy returns err, an error of the server's, as one matching
// ErrServerFailed; a break of the protocol stays as it is.
func failedBy(err error) error {
	if errors.Is(err, ErrProtocol) || errors.Is(err, ErrServerFailed) {
		return err
	}
	return &serverFailed{err}
}

// GRPCStatus is the status of the server's error, nil when it has none, so
// that Message says it as it would say err.
func (e *serverFailed) GRPCStatus() *status.Status {
	if s, ok := status.FromError(e.err); ok {
		return s
	}
	return nil
}

func (s *Stream[Req, Resp]) grace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return DefaultGrace
}

// get returns the stream to use, marked busy: the open one if it is on the
// current connection, else a new one (connecting first if needed).
func (s *Stream[Req, Resp]) get(ctx context.Context) (*opened[Req, Resp], error) {
	for retried := false; ; retried = true {
		cc, _, err := s.conn.Get(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if o := s.cur; o != nil {
			if o.cc == cc {
				o.busy = true
				s.mu.Unlock()
				return o, nil
			}
			// The connection it was opened on was dropped, and the stream with it.
			o.cancel()
			s.cur = nil
		}
		s.mu.Unlock()
		o, err := s.open(ctx, cc)
		if err == nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.closed {
				o.cancel()
				return nil, ErrClosed
			}
			o.busy, s.cur = true, o
			return o, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// When cc was no longer current (another stream had seen the server
		// fail), open once more on the connection made since.
		if s.conn.Broken(cc, err) || retried {
			return nil, failedBy(err)
		}
	}
}

// open opens a stream on cc and makes the handshake, for no longer than ctx.
func (s *Stream[Req, Resp]) open(ctx context.Context, cc *grpc.ClientConn) (*opened[Req, Resp], error) {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	st, err := s.Open(sctx, cc)
	if err == nil {
		err = st.Send(s.Handshake())
	}
	var ack *Resp
	if err == nil {
		ack, err = st.Recv()
	}
	if err == nil && !s.Echoed(ack) {
		err = fmt.Errorf("%w: no handshake in the first answer", ErrProtocol)
	}
	if !stop() && err == nil {
		err = ctx.Err() // the stream was cancelled with ctx
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &opened[Req, Resp]{cc: cc, st: st, ctx: sctx, cancel: cancel}, nil
}

// Exchange sends requests with send (from its own goroutine, so that answers
// never wait on requests) while it hands each answer to recv until recv says the
// exchange is done; n is the number of messages the exchange carries, for its
// warnings and status. On an error the stream is dropped, with its connection if
// that is still current, and the error returned.
//
// The exchange is a call with a deadline, from when the server is connected
// (the wait for it to connect is not part of it): past the deadline the stream
// is cancelled and dropped, keeping the connection, recv is handed no more
// answers, and Exchange returns an error matching [ErrDeadline].
//
// When ctx ends first, that is no failure of the server: the stream is
// half-closed once the requests are sent, and the server has the stream's
// grace to finish the exchange. Exchange returns nil if it does, every answer
// handed to recv, and ctx's error if not; either way the stream is not used
// again, and it is cancelled once the server ends it or the grace is over.
func (s *Stream[Req, Resp]) Exchange(ctx context.Context, n int, send func(func(*Req) error) error, recv func(*Resp) (done bool, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := s.conn.Get(ctx); err != nil {
		return err
	}
	call := s.conn.begin(s.name(), n, s.Allowance)
	return call.End(s.exchange(ctx, call, send, recv))
}

func (s *Stream[Req, Resp]) name() string {
	if s.Name == "" {
		return "stream"
	}
	return s.Name
}

// errAbandoned stops an exchange whose call was abandoned.
var errAbandoned = errors.New("the call was abandoned")

// exchange is Exchange's exchange, as call.
func (s *Stream[Req, Resp]) exchange(ctx context.Context, call *Call, send func(func(*Req) error) error, recv func(*Resp) (done bool, err error)) error {
	opening, stopOpening := context.WithCancel(ctx)
	defer stopOpening()
	call.OnAbandon(stopOpening) // a handshake that does not come
	o, err := s.get(opening)
	if err != nil {
		return err
	}
	call.OnAbandon(o.cancel)
	var sendErr error
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		sendErr = send(o.st.Send)
	}()
	halfClosed := make(chan struct{})
	var deadline *time.Timer
	stop := context.AfterFunc(ctx, func() {
		defer close(halfClosed)
		deadline = time.AfterFunc(s.grace(), o.cancel)
		select {
		case <-sent:
			o.st.CloseSend()
		case <-o.ctx.Done(): // the requests still not sent when the grace ended
		}
	})
	err = receive(o, func(r *Resp) (bool, error) {
		if call.Abandoned() { // a late answer is not taken
			return true, errAbandoned
		}
		return recv(r)
	})
	if !stop() {
		<-halfClosed
		<-sent
		s.drop(o)
		if !s.conn.retire(func() { drain(o); deadline.Stop(); o.cancel() }) {
			deadline.Stop()
			o.cancel()
		}
		if err != nil {
			return fmt.Errorf("%w (the server did not finish the exchange within %v)", ctx.Err(), s.grace())
		}
		return nil
	}
	if err != nil {
		o.cancel() // so that a send still waiting returns
	}
	<-sent
	if err == nil {
		err = sendErr
	}
	if err != nil {
		s.drop(o)
		o.cancel()
		if !s.isClosed() && !call.Abandoned() {
			s.conn.Broken(o.cc, err)
			if ctx.Err() == nil {
				err = failedBy(err)
			}
		}
		return err
	}
	s.mu.Lock()
	o.busy = false
	s.mu.Unlock()
	return nil
}

// receive hands the answers to recv until it says the exchange is done.
func receive[Req, Resp any](o *opened[Req, Resp], recv func(*Resp) (bool, error)) error {
	for {
		resp, err := o.st.Recv()
		if err != nil {
			return err
		}
		if done, err := recv(resp); err != nil || done {
			return err
		}
	}
}

// drain reads a half-closed stream until the server ends it, or it is cancelled.
func drain[Req, Resp any](o *opened[Req, Resp]) {
	for {
		if _, err := o.st.Recv(); err != nil {
			return
		}
	}
}

// drop forgets o, if it is the open stream.
func (s *Stream[Req, Resp]) drop(o *opened[Req, Resp]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == o {
		s.cur = nil
	}
}

func (s *Stream[Req, Resp]) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes the stream for good: it half-closes the open stream and gives
// the server the grace to end it, in the background, before the connection's
// Close (which waits for that) closes the connection. A stream in the middle
// of an exchange is cancelled at once.
func (s *Stream[Req, Resp]) Close() {
	s.mu.Lock()
	s.closed = true
	o, busy := s.cur, s.cur != nil && s.cur.busy
	s.cur = nil
	s.mu.Unlock()
	if o == nil {
		return
	}
	end := func() {
		deadline := time.AfterFunc(s.grace(), o.cancel)
		defer deadline.Stop()
		defer o.cancel()
		if o.st.CloseSend() == nil {
			drain(o)
		}
	}
	if busy || !s.conn.retire(end) {
		o.cancel()
	}
}
