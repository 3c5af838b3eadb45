package udsconn

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
)

// Stream is a bidirectional stream to a UDF server: opened on demand with the
// start-of-transmission handshake, reused call after call, and dropped together
// with its connection after an error, so that the next call starts afresh. A
// Stream carries one exchange at a time.
type Stream[Req, Resp any] struct {
	conn *Conn
	// Open opens the stream on a connection.
	Open func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[Req, Resp], error)
	// Handshake is the first request of a stream; Echoed checks the server's
	// answer to it.
	Handshake func() *Req
	Echoed    func(*Resp) bool

	mu     sync.Mutex
	st     grpc.BidiStreamingClient[Req, Resp]
	cancel context.CancelFunc
}

// NewStream returns a stream on conn.
func NewStream[Req, Resp any](conn *Conn) *Stream[Req, Resp] { return &Stream[Req, Resp]{conn: conn} }

// ErrProtocol is matched by errors for answers that break the protocol.
var ErrProtocol = errors.New("UDF server broke the protocol")

// get returns the open stream, opening it (and connecting) first if needed.
func (s *Stream[Req, Resp]) get(ctx context.Context) (grpc.BidiStreamingClient[Req, Resp], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st != nil {
		return s.st, nil
	}
	cc, _, err := s.conn.Get(ctx)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
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
	if err != nil {
		cancel()
		s.conn.Broken(err)
		return nil, err
	}
	s.st, s.cancel = st, cancel
	return st, nil
}

// fail drops the stream and its connection after err.
func (s *Stream[Req, Resp]) fail(err error) {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.st, s.cancel = nil, nil
	s.mu.Unlock()
	s.conn.Broken(err)
}

// Exchange sends requests with send (from its own goroutine, so that answers
// never wait on requests) while it hands each answer to recv until recv says the
// exchange is done. When ctx ends first, or on any error, the stream is dropped
// and the error returned.
func (s *Stream[Req, Resp]) Exchange(ctx context.Context, send func(func(*Req) error) error, recv func(*Resp) (done bool, err error)) error {
	st, err := s.get(ctx)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.fail(ctx.Err()) })
	defer stop()
	sent := make(chan error, 1)
	go func() { sent <- send(st.Send) }()
	for {
		resp, err := st.Recv()
		if err == nil {
			var done bool
			if done, err = recv(resp); err == nil && !done {
				continue
			} else if err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		s.fail(err)
		<-sent
		return err
	}
	if err := <-sent; err != nil {
		s.fail(err)
		return err
	}
	return nil
}

// Close closes the stream's send side.
func (s *Stream[Req, Resp]) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.st, s.cancel = nil, nil
}
