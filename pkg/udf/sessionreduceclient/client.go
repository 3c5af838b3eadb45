package sessionreduceclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/udsconn"
	sessionreducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/sessionreduce/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// DropTag marks a result that is to be dropped.
const DropTag = "U+005C__DROP__"

// DefaultSlot is the slot a KeyedWindow names when it names none.
const DefaultSlot = "slot-0"

// KeyedWindow is a session: the event-time interval [Start, End) of Keys,
// in the slot Slot of the runtime's state (DefaultSlot when empty).
type KeyedWindow struct {
	Start, End time.Time
	Keys       []string
	Slot       string
}

func (w KeyedWindow) String() string {
	return fmt.Sprintf("[%s, %s) %q", w.Start.UTC().Format(time.RFC3339Nano), w.End.UTC().Format(time.RFC3339Nano), w.Keys)
}

// id is how the server tells sessions apart: the milliseconds of start and
// end and the keys.
func (w KeyedWindow) id() string { return windowID(w.Start, w.End, w.Keys) }

func windowID(start, end time.Time, keys []string) string {
	var sb strings.Builder
	sb.WriteString(strconv.FormatInt(start.UnixMilli(), 10))
	sb.WriteByte(':')
	sb.WriteString(strconv.FormatInt(end.UnixMilli(), 10))
	for _, k := range keys {
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(len(k)))
		sb.WriteByte(':')
		sb.WriteString(k)
	}
	return sb.String()
}

func (w KeyedWindow) proto() *sessionreducev1.KeyedWindow {
	slot := w.Slot
	if slot == "" {
		slot = DefaultSlot
	}
	return &sessionreducev1.KeyedWindow{Start: timestamppb.New(w.Start), End: timestamppb.New(w.End), Slot: slot, Keys: w.Keys}
}

// Message is one input message of a session, with the watermark of the
// vertex when it was read (zero: unknown, sent as -1 ms as Numaflow does).
type Message struct {
	isb.Message
	Watermark time.Time
}

// Result is one result of a session.
type Result struct {
	// Window is the session the result belongs to.
	Window KeyedWindow
	// EventTime is the session's end less a millisecond.
	EventTime time.Time
	Keys      []string
	Value     []byte
	// Tags route the result along conditional edges; DropTag drops it.
	Tags []string
	// Metadata is the user metadata the function gave the result.
	Metadata isb.Metadata
}

// Client is the connection to one session reduce server and its one
// stream. It is safe for concurrent use; operations are sent in the order
// their calls take the client's lock.
type Client struct {
	conn *udsconn.Conn

	mu     sync.Mutex
	st     *stream // nil until the first operation, and after a failure
	closed bool
}

// stream is one SessionReduceFn stream and the sessions waiting for their
// results on it.
type stream struct {
	cc     *grpc.ClientConn
	st     sessionreducev1.SessionReduce_SessionReduceFnClient
	cancel context.CancelFunc
	done   chan struct{} // closed when the receiver ends

	mu      sync.Mutex
	err     error               // why the stream failed; set before done closes
	waiting map[string]*closing // closed sessions by id, until their EOF
}

// closing is a session closed and waiting for its results.
type closing struct {
	w    KeyedWindow
	res  []Result
	done chan struct{} // closed at the session's EOF
}

// New returns a client, not yet connected, of the session reduce server in
// dir: it waits for the server-info file and socket there. opts configure
// its connection ([udf.WithCalls] gives its calls their deadline).
func New(dir string, log *zap.Logger, opts ...udf.Option) *Client {
	conn := udsconn.New(dir, udf.KindSessionReduce, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := sessionreducev1.NewSessionReduceClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	return &Client{conn: conn}
}

// Connect waits until the server is up and ready, or ctx ends. An
// incompatible server gives an error matching [udf.ErrIncompatible].
func (c *Client) Connect(ctx context.Context) error {
	_, _, err := c.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (c *Client) Ready() error { return c.conn.Ready() }

// Close ends the stream and closes the connection; operations waiting on
// the stream fail. It is safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	st := c.st
	c.st = nil
	c.mu.Unlock()
	if st != nil {
		st.fail(ErrClosed)
		<-st.done
	}
	return c.conn.Close()
}

// Open opens session w on the server with its first message m.
func (c *Client) Open(ctx context.Context, w KeyedWindow, m Message) error {
	_, err := c.send(ctx, nil, nil, sessionreducev1.SessionReduceRequest_WindowOperation_OPEN, &m, nil, w)
	return err
}

// Append adds m to the open session w.
func (c *Client) Append(ctx context.Context, w KeyedWindow, m Message) error {
	_, err := c.send(ctx, nil, nil, sessionreducev1.SessionReduceRequest_WindowOperation_APPEND, &m, nil, w)
	return err
}

// Expand makes the open session old the session to, which covers it, and
// adds m to it.
func (c *Client) Expand(ctx context.Context, old, to KeyedWindow, m Message) error {
	_, err := c.send(ctx, nil, nil, sessionreducev1.SessionReduceRequest_WindowOperation_EXPAND, &m, nil, old, to)
	return err
}

// Merge merges the open sessions ws, of one key set, into one session: the
// smallest window that covers them all, which later operations name.
func (c *Client) Merge(ctx context.Context, ws ...KeyedWindow) error {
	_, err := c.send(ctx, nil, nil, sessionreducev1.SessionReduceRequest_WindowOperation_MERGE, nil, nil, ws...)
	return err
}

// CloseSessions closes the open sessions ws and returns the results of
// each, in the order of ws, each in the order the server sent them, once
// the server has ended every one. That is a call with a deadline (see
// udf, Clients): past it the stream fails, with its open sessions,
// and the error matches [udf.ErrDeadline].
func (c *Client) CloseSessions(ctx context.Context, ws ...KeyedWindow) ([][]Result, error) {
	return c.closeOn(ctx, nil, ws...)
}

// closeOn closes ws on stream st (nil: the current one), in one call.
func (c *Client) closeOn(ctx context.Context, st *stream, ws ...KeyedWindow) ([][]Result, error) {
	if _, _, err := c.conn.Get(ctx); err != nil {
		return nil, fmt.Errorf("sessionreduce: %w", err)
	}
	call := c.conn.Begin("SessionReduceFn CLOSE", len(ws))
	res, err := c.closeIn(ctx, st, call, ws)
	return res, call.End(err)
}

func (c *Client) closeIn(ctx context.Context, st *stream, call *udsconn.Call, ws []KeyedWindow) ([][]Result, error) {
	waits := make([]*closing, len(ws))
	for i, w := range ws {
		waits[i] = &closing{w: w, done: make(chan struct{})}
	}
	st, err := c.send(ctx, st, call, sessionreducev1.SessionReduceRequest_WindowOperation_CLOSE, nil, waits, ws...)
	if err != nil {
		return nil, err
	}
	out := make([][]Result, len(ws))
	for i, w := range waits {
		select {
		case <-w.done:
			out[i] = w.res
		case <-st.done:
			err := st.failure()
			c.drop(st, err) // told: the next operation opens a new stream
			return nil, err
		case <-ctx.Done():
			// The session's results may still come: the stream is of no
			// more use, and the caller sends its sessions again.
			c.drop(st, fmt.Errorf("%w: closing %s: %w", ErrStream, w.w, ctx.Err()))
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// Reduce reduces one whole session: Open with the first message, Append
// the others, and Close, all on one stream; it returns the session's
// results.
func (c *Client) Reduce(ctx context.Context, w KeyedWindow, in []Message) ([]Result, error) {
	if len(in) == 0 {
		return nil, nil
	}
	st, err := c.send(ctx, nil, nil, sessionreducev1.SessionReduceRequest_WindowOperation_OPEN, &in[0], nil, w)
	if err != nil {
		return nil, err
	}
	for i := range in[1:] {
		if _, err := c.send(ctx, st, nil, sessionreducev1.SessionReduceRequest_WindowOperation_APPEND, &in[1+i], nil, w); err != nil {
			return nil, err
		}
	}
	res, err := c.closeOn(ctx, st, w)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// send sends one operation on ws, with m when not nil, on stream on, or
// with on nil on the current stream, opened first when there is none (or
// it failed); waits, for CLOSE, are registered before the request goes. It
// returns the stream used. The send is part of call, which abandoned fails
// the stream; with call nil it is a call of its own (BeginSend).
func (c *Client) send(ctx context.Context, on *stream, call *udsconn.Call, ev sessionreducev1.SessionReduceRequest_WindowOperation_Event, m *Message, waits []*closing, ws ...KeyedWindow) (_ *stream, err error) {
	req := &sessionreducev1.SessionReduceRequest{Operation: &sessionreducev1.SessionReduceRequest_WindowOperation{Event: ev}}
	for _, w := range ws {
		req.Operation.KeyedWindows = append(req.Operation.KeyedWindows, w.proto())
	}
	if m != nil {
		wm := m.Watermark
		if wm.IsZero() {
			wm = time.UnixMilli(-1)
		}
		req.Payload = &sessionreducev1.SessionReduceRequest_Payload{Keys: m.Keys, Value: m.Value,
			EventTime: timestamppb.New(m.EventTime), Watermark: timestamppb.New(wm), Headers: m.Headers,
			Metadata: isbproto.ToMetadata(m.Metadata)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := on
	if st == nil {
		var err error
		if st, err = c.stream(ctx); err != nil {
			return nil, err
		}
	} else if err := st.failure(); err != nil {
		return nil, fmt.Errorf("sessionreduce: %s %v: %w", ev, ws, err)
	}
	if call == nil {
		n := len(ws)
		if m != nil {
			n = 1
		}
		call = c.conn.BeginSend("SessionReduceFn "+ev.String(), n)
		defer func() { err = call.End(err) }()
	}
	call.OnAbandon(func() { st.fail(call.Err()) })
	if len(waits) > 0 {
		st.mu.Lock()
		for _, w := range waits {
			st.waiting[w.w.id()] = w
		}
		st.mu.Unlock()
	}
	if err := st.st.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			<-st.done // the receiver has the reason
			err = st.failure()
		}
		c.dropLocked(st, err)
		return nil, fmt.Errorf("sessionreduce: %s %v: %w", ev, ws, st.failure())
	}
	return st, nil
}

// stream returns the open stream, opening one if there is none; c.mu is
// held. A stream that failed gives its failure once, then a new stream.
func (c *Client) stream(ctx context.Context) (*stream, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.st != nil {
		select {
		case <-c.st.done: // failed: the sessions it held are gone, which the caller learns first
			st := c.st
			c.st = nil
			return nil, st.failure()
		default:
			return c.st, nil
		}
	}
	cc, _, err := c.conn.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("sessionreduce: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	rpc, err := sessionreducev1.NewSessionReduceClient(cc).SessionReduceFn(sctx)
	if err != nil {
		cancel()
		c.conn.Broken(cc, err)
		return nil, fmt.Errorf("sessionreduce: %w", err)
	}
	st := &stream{cc: cc, st: rpc, cancel: cancel, done: make(chan struct{}), waiting: map[string]*closing{}}
	go st.receive()
	c.st = st
	return st, nil
}

// drop ends st, failing with err, and forgets it, so that the next
// operation opens a new stream.
func (c *Client) drop(st *stream, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(st, err)
}

func (c *Client) dropLocked(st *stream, err error) {
	if st == nil {
		return
	}
	st.fail(err)
	if c.st == st {
		c.st = nil
	}
	if f := st.failure(); !errors.Is(f, ErrClosed) && !errors.Is(f, udf.ErrDeadline) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.conn.Broken(st.cc, err)
	}
}

// receive hands each result to its session until the stream ends.
func (st *stream) receive() {
	defer close(st.done)
	for {
		resp, err := st.st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the server ended the stream", udf.ErrProtocol)
			}
			st.fail(err)
			return
		}
		kw := resp.GetKeyedWindow()
		id := windowID(kw.GetStart().AsTime(), kw.GetEnd().AsTime(), kw.GetKeys())
		st.mu.Lock()
		w := st.waiting[id]
		if w == nil {
			st.mu.Unlock()
			st.fail(fmt.Errorf("%w: a result of the session [%s, %s) %q, which is not closing", udf.ErrProtocol,
				kw.GetStart().AsTime().UTC().Format(time.RFC3339Nano), kw.GetEnd().AsTime().UTC().Format(time.RFC3339Nano), kw.GetKeys()))
			return
		}
		if resp.GetEOF() {
			delete(st.waiting, id)
			close(w.done)
		} else {
			r := resp.GetResult()
			w.res = append(w.res, Result{Window: w.w, EventTime: w.w.End.Add(-time.Millisecond), Keys: r.GetKeys(),
				Value: r.GetValue(), Tags: r.GetTags(), Metadata: isbproto.FromMetadata(r.GetMetadata())})
		}
		st.mu.Unlock()
	}
}

// fail records the stream's first failure and cancels it.
func (st *stream) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.cancel()
}

// failure is why the stream failed, matching ErrStream.
func (st *stream) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		return nil
	}
	if errors.Is(st.err, ErrStream) || errors.Is(st.err, ErrClosed) {
		return st.err
	}
	return fmt.Errorf("%w: %w", ErrStream, st.err)
}
