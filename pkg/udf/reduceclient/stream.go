package reduceclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/udsconn"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Message is one input message of a window, with the watermark of the vertex
// when it was read (zero: unknown, sent as -1 ms as Numaflow does).
type Message struct {
	isb.Message
	Watermark time.Time
}

// Result is one result of a window.
type Result struct {
	// Window is the window the server says the result belongs to: the
	// stream's.
	Window Window
	// EventTime is ResultTime(Window.End).
	EventTime time.Time
	Keys      []string
	Value     []byte
	// Tags route the result along conditional edges; DropTag drops it.
	Tags []string
	// Metadata is the user metadata the function gave the result.
	Metadata isb.Metadata
}

// Stream carries one window to the server: Send its messages, CloseSend to
// end the window, and Recv the results until io.EOF. Send and CloseSend are
// for one goroutine and Recv for one, which may be another; a Stream that
// failed, or whose context ended, fails every call after.
type Stream struct {
	c      *Client
	w      Window
	pw     *reducev1.Window
	cc     *grpc.ClientConn
	st     reducev1.Reduce_ReduceFnClient
	ctx    context.Context
	cancel context.CancelFunc

	opened     map[string]bool // the keys sent so far; Send's
	sent       int
	halfClosed bool

	mu  sync.Mutex
	err error // the first failure, for Recv and Send alike
	eof bool
	// call is the call the window's results are awaited in: Reduce's, or
	// from CloseSend, when own, to the results' EOF.
	call *udsconn.Call
	own  bool
}

// Open opens the stream of window w, connecting first if needed, for no longer
// than ctx: once ctx ends, the stream is cancelled. From CloseSend to the
// results' EOF the stream is a call with a deadline (see udf,
// Clients): past it the stream fails with an error matching
// [udf.ErrDeadline].
func (c *Client) Open(ctx context.Context, w Window) (*Stream, error) { return c.open(ctx, w, nil) }

// open opens the stream of window w, in call when not nil: abandoning the
// call fails the stream.
func (c *Client) open(ctx context.Context, w Window, call *udsconn.Call) (*Stream, error) {
	cc, _, err := c.conn.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("reduce: window %s: %w", w, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := reducev1.NewReduceClient(cc).ReduceFn(sctx)
	if err != nil {
		cancel()
		return nil, c.fail(ctx, cc, w, err)
	}
	s := &Stream{c: c, w: w, pw: w.proto(), cc: cc, st: st, ctx: sctx, cancel: cancel, opened: map[string]bool{}, call: call}
	if call != nil {
		call.OnAbandon(func() { s.setErr(call.Err()) })
	}
	return s, nil
}

// Window is the stream's window.
func (s *Stream) Window() Window { return s.w }

// Send sends m to the window: with OPEN when it is the first message of its
// keys on the stream, else with APPEND.
func (s *Stream) Send(m Message) error {
	if s.halfClosed {
		return ErrClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	id := window.KeysID(m.Keys)
	ev := reducev1.ReduceRequest_WindowOperation_APPEND
	if !s.opened[id] {
		ev = reducev1.ReduceRequest_WindowOperation_OPEN
		s.opened[id] = true
	}
	wm := m.Watermark
	if wm.IsZero() {
		wm = time.UnixMilli(-1)
	}
	req := &reducev1.ReduceRequest{
		Payload: &reducev1.ReduceRequest_Payload{Keys: m.Keys, Value: m.Value, EventTime: timestamppb.New(m.EventTime),
			Watermark: timestamppb.New(wm), Headers: m.Headers, Metadata: isbproto.ToMetadata(m.Metadata)},
		Operation: &reducev1.ReduceRequest_WindowOperation{Event: ev, Windows: []*reducev1.Window{s.pw}},
	}
	if err := s.st.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("reduce: window %s: %w", s.w, ErrEnded)
		}
		return s.setErr(err)
	}
	s.sent++
	return nil
}

// CloseSend ends the window: the server finishes its function for every keys
// sent and answers with the results.
func (s *Stream) CloseSend() error {
	if s.halfClosed {
		return nil
	}
	s.halfClosed = true
	s.mu.Lock()
	var call *udsconn.Call
	if s.call == nil && s.err == nil {
		call = s.c.conn.Begin("ReduceFn", s.sent)
		s.call, s.own = call, true
	}
	s.mu.Unlock()
	if call != nil {
		call.OnAbandon(func() { s.setErr(call.Err()) })
	}
	if err := s.st.CloseSend(); err != nil {
		return s.setErr(err)
	}
	return nil
}

// Recv returns the next result of the window, io.EOF once the server has sent
// them all and ended the stream, or the stream's error.
func (s *Stream) Recv() (Result, error) {
	if err := s.failed(); err != nil {
		return Result{}, err
	}
	for {
		resp, err := s.st.Recv()
		s.mu.Lock()
		eof := s.eof
		s.mu.Unlock()
		switch {
		case errors.Is(err, io.EOF) && eof:
			s.cancel()
			s.endCall(nil)
			return Result{}, io.EOF
		case errors.Is(err, io.EOF):
			return Result{}, s.setErr(fmt.Errorf("%w: the stream ended without EOF", udf.ErrProtocol))
		case err != nil:
			return Result{}, s.setErr(err)
		case eof:
			return Result{}, s.setErr(fmt.Errorf("%w: an answer after EOF", udf.ErrProtocol))
		case resp.GetEOF():
			s.mu.Lock()
			s.eof = true
			s.mu.Unlock()
			continue
		}
		if err := s.checkWindow(resp.GetWindow()); err != nil {
			return Result{}, s.setErr(err)
		}
		r := resp.GetResult()
		return Result{Window: s.w, EventTime: ResultTime(s.w.End), Keys: r.GetKeys(), Value: r.GetValue(),
			Tags: r.GetTags(), Metadata: isbproto.FromMetadata(r.GetMetadata())}, nil
	}
}

// checkWindow checks that a result names the stream's window, to the
// millisecond, as servers key it.
func (s *Stream) checkWindow(w *reducev1.Window) error {
	start, end := w.GetStart().AsTime(), w.GetEnd().AsTime()
	if w == nil || start.UnixMilli() != s.w.Start.UnixMilli() || end.UnixMilli() != s.w.End.UnixMilli() {
		return fmt.Errorf("%w: a result of the window [%s, %s)", udf.ErrProtocol,
			start.UTC().Format(time.RFC3339Nano), end.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Close cancels the stream, if it has not ended; it is safe to call twice,
// and after io.EOF it does nothing. A stream that is not read to io.EOF must be
// closed.
func (s *Stream) Close() {
	s.cancel()
	s.endCall(ErrClosed)
}

// endCall ends the call CloseSend began, if any, with err.
func (s *Stream) endCall(err error) {
	s.mu.Lock()
	call, own := s.call, s.own
	s.mu.Unlock()
	if own {
		call.End(err)
	}
}

func (s *Stream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// setErr records the stream's first failure, wrapped with the window, and
// returns it; a failure of the server drops the connection.
func (s *Stream) setErr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.c.fail(s.ctx, s.cc, s.w, err)
		s.cancel()
		if s.own {
			s.call.End(s.err)
		}
	}
	return s.err
}

// fail wraps err with the window and, when it is the server's failure rather
// than the end of the caller's context ctx or a call abandoned at its
// deadline, drops the connection cc.
func (c *Client) fail(ctx context.Context, cc *grpc.ClientConn, w Window, err error) error {
	if ctx.Err() == nil && !errors.Is(err, udf.ErrDeadline) {
		c.conn.Broken(cc, err)
	}
	return fmt.Errorf("reduce: window %s: %w", w, err)
}
