package accumulatorclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/udsconn"
	accumulatorv1 "github.com/sluiceflow/sluice/pkg/apis/proto/accumulator/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Slot is the slot every key set's window names.
const Slot = "slot-0"

// Op is what a request does to its key set's accumulator. The zero value
// is OpOpen.
type Op uint8

// The operations, with their wire values.
const (
	OpOpen   Op = 0 // the first message of a key set: the server makes its accumulator
	OpClose  Op = 1 // end the key set's accumulator; no message
	OpAppend Op = 2 // a further message of the key set
)

func (o Op) String() string {
	switch o {
	case OpOpen:
		return "open"
	case OpClose:
		return "close"
	case OpAppend:
		return "append"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Request is one request: a message of a key set and its operation.
type Request struct {
	Op Op
	// Keys is the key set; Start and End its window, as the runtime keeps
	// it (Start the first event time, End Start plus the timeout).
	Keys       []string
	Start, End time.Time
	// Message is the message, for OpOpen and OpAppend; its ID is what the
	// function deduplicates by.
	Message isb.Message
	// Watermark is the vertex's watermark (zero: none, sent as -1 ms).
	Watermark time.Time
}

// Response is a message an accumulator emitted, or the end of one.
type Response struct {
	// Keys is the key set of the accumulator, from its window; End is the
	// window's end, the latest watermark the accumulator emitted with.
	Keys []string
	End  time.Time
	// EOF says the key set's accumulator has returned; Message is empty.
	EOF bool
	// Message is the emitted message: keys, value, event time, ID,
	// headers and tags as the function gave them.
	Message   isb.Message
	Watermark time.Time
}

// Client is the connection to one accumulator server. It is safe for
// concurrent use.
type Client struct {
	conn *udsconn.Conn
}

// New returns a client, not yet connected, of the accumulator server in
// dir: it waits for the server-info file and socket there. opts configure
// its connection ([udf.WithCalls] gives its calls their deadline).
func New(dir string, log *zap.Logger, opts ...udf.Option) *Client {
	conn := udsconn.New(dir, udf.KindAccumulator, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := accumulatorv1.NewAccumulatorClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	return &Client{conn: conn}
}

// Connect waits until the server is up and ready, or ctx ends.
func (c *Client) Connect(ctx context.Context) error {
	_, _, err := c.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (c *Client) Ready() error { return c.conn.Ready() }

// Close closes the connection; open streams fail.
func (c *Client) Close() error { return c.conn.Close() }

// Stream is one AccumulateFn stream. Send and CloseSend are for one
// goroutine, Recv for one, which may be another. A Stream that failed fails
// every call after; Close ends it.
//
// Each Send, and each key set closed (OpClose) until its EOF comes back,
// is a call with a deadline (see udf, Clients): past it the stream
// fails with an error matching [udf.ErrDeadline].
type Stream struct {
	c      *Client
	cc     *grpc.ClientConn
	st     accumulatorv1.Accumulator_AccumulateFnClient
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	err        error
	halfClosed bool
	// closing are the calls of the key sets closed and not yet answered
	// with their EOF, by window.KeysID, in the order closed.
	closing map[string][]*udsconn.Call
}

// Open opens a stream, connecting first if needed, for no longer than ctx.
func (c *Client) Open(ctx context.Context) (*Stream, error) {
	cc, _, err := c.conn.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("accumulator: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := accumulatorv1.NewAccumulatorClient(cc).AccumulateFn(sctx)
	if err != nil {
		cancel()
		if ctx.Err() == nil {
			c.conn.Broken(cc, err)
		}
		return nil, fmt.Errorf("accumulator: %w", err)
	}
	return &Stream{c: c, cc: cc, st: st, ctx: sctx, cancel: cancel, closing: map[string][]*udsconn.Call{}}, nil
}

// Send sends r.
func (s *Stream) Send(r Request) (err error) {
	if err := s.failed(); err != nil {
		return err
	}
	req := &accumulatorv1.AccumulatorRequest{Operation: &accumulatorv1.AccumulatorRequest_WindowOperation{
		Event: accumulatorv1.AccumulatorRequest_WindowOperation_Event(r.Op),
		KeyedWindow: &accumulatorv1.KeyedWindow{Start: timestamppb.New(r.Start), End: timestamppb.New(r.End),
			Slot: Slot, Keys: r.Keys},
	}}
	if r.Op != OpClose {
		wm := r.Watermark
		if wm.IsZero() {
			wm = time.UnixMilli(-1)
		}
		m := &r.Message
		req.Payload = &accumulatorv1.Payload{Keys: m.Keys, Value: m.Value, EventTime: timestamppb.New(m.EventTime),
			Watermark: timestamppb.New(wm), Id: m.ID, Headers: m.Headers, Metadata: isbproto.ToMetadata(m.Metadata)}
	}
	var call *udsconn.Call
	if r.Op == OpClose {
		call = s.c.conn.Begin("AccumulateFn close", 1)
		s.mu.Lock()
		id := window.KeysID(r.Keys)
		s.closing[id] = append(s.closing[id], call)
		s.mu.Unlock()
	} else {
		call = s.c.conn.BeginSend("AccumulateFn "+r.Op.String(), 1)
		defer func() { call.End(err) }()
	}
	call.OnAbandon(func() { s.setErr(call.Err()) })
	if err := s.st.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			_, err = s.st.Recv() // the server's reason
		}
		return s.setErr(err)
	}
	return nil
}

// answered ends the call of the first key set of keys closed and not yet
// answered.
func (s *Stream) answered(keys []string) {
	id := window.KeysID(keys)
	s.mu.Lock()
	q := s.closing[id]
	if len(q) == 0 {
		s.mu.Unlock()
		return
	}
	if s.closing[id] = q[1:]; len(q) == 1 {
		delete(s.closing, id)
	}
	s.mu.Unlock()
	q[0].End(nil)
}

// CloseSend half-closes the stream: the server closes every accumulator
// still open, answers their EOFs, and ends the stream.
func (s *Stream) CloseSend() error {
	s.mu.Lock()
	s.halfClosed = true
	s.mu.Unlock()
	if err := s.st.CloseSend(); err != nil {
		return s.setErr(err)
	}
	return nil
}

// Recv returns the next response; io.EOF once the server has ended the
// stream after CloseSend; or the stream's error.
func (s *Stream) Recv() (Response, error) {
	if err := s.failed(); err != nil {
		return Response{}, err
	}
	resp, err := s.st.Recv()
	if errors.Is(err, io.EOF) {
		s.mu.Lock()
		hc := s.halfClosed
		s.mu.Unlock()
		if hc {
			return Response{}, io.EOF
		}
		return Response{}, s.setErr(fmt.Errorf("%w: the stream ended before the client ended it", udf.ErrProtocol))
	}
	if err != nil {
		return Response{}, s.setErr(err)
	}
	w := resp.GetWindow()
	if w == nil {
		return Response{}, s.setErr(fmt.Errorf("%w: a response without a window", udf.ErrProtocol))
	}
	r := Response{Keys: w.GetKeys(), End: w.GetEnd().AsTime(), EOF: resp.GetEOF()}
	if r.EOF {
		s.answered(r.Keys)
	}
	if p := resp.GetPayload(); p != nil && !r.EOF {
		r.Message = isb.Message{Keys: p.GetKeys(), Value: p.GetValue(), EventTime: p.GetEventTime().AsTime(),
			ID: p.GetId(), Headers: p.GetHeaders(), Tags: resp.GetTags(), Metadata: isbproto.FromMetadata(p.GetMetadata())}
		r.Watermark = p.GetWatermark().AsTime()
	}
	return r, nil
}

// Close cancels the stream; it is safe to call twice.
func (s *Stream) Close() {
	s.cancel()
	s.endCalls(fmt.Errorf("accumulator: %w", context.Canceled))
}

// endCalls ends the calls of the key sets still closing with err.
func (s *Stream) endCalls(err error) {
	s.mu.Lock()
	closing := s.closing
	s.closing = map[string][]*udsconn.Call{}
	s.mu.Unlock()
	for _, q := range closing {
		for _, call := range q {
			call.End(err)
		}
	}
}

func (s *Stream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// setErr records the stream's first failure and returns it; a failure of
// the server, not of the caller's context nor a call abandoned at its
// deadline, drops the connection. The calls of the key sets still closing
// end with it.
func (s *Stream) setErr(err error) error {
	s.mu.Lock()
	first := s.err == nil
	if first {
		if s.ctx.Err() == nil && !errors.Is(err, udf.ErrDeadline) {
			s.c.conn.Broken(s.cc, err)
		}
		s.err = fmt.Errorf("accumulator: %w", err)
		s.cancel()
	}
	err = s.err
	s.mu.Unlock()
	if first {
		s.endCalls(err)
	}
	return err
}
