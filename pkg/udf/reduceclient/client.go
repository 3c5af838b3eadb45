package reduceclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/udsconn"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// DropTag marks a result that is to be dropped.
const DropTag = "U+005C__DROP__"

// DefaultSlot is the slot a Window names when it names none.
const DefaultSlot = "slot-0"

// Window is a window [Start, End) of event time, in the slot Slot of the
// runtime's state (DefaultSlot when empty). The wire carries times in
// milliseconds' precision and more; servers key their tasks by the
// milliseconds of Start and End.
type Window struct {
	Start, End time.Time
	Slot       string
}

func (w Window) String() string {
	return fmt.Sprintf("[%s, %s)", w.Start.UTC().Format(time.RFC3339Nano), w.End.UTC().Format(time.RFC3339Nano))
}

// ResultTime is the event time of the results of a window ending at end:
// end less one millisecond.
func ResultTime(end time.Time) time.Time { return end.Add(-time.Millisecond) }

func (w Window) proto() *reducev1.Window {
	slot := w.Slot
	if slot == "" {
		slot = DefaultSlot
	}
	return &reducev1.Window{Start: timestamppb.New(w.Start), End: timestamppb.New(w.End), Slot: slot}
}

// Client is the connection to one reduce or reduce-stream server. It is safe
// for concurrent use; each window opens a Stream of its own on it.
type Client struct {
	kind udf.Kind
	conn *udsconn.Conn
}

// New returns a client, not yet connected, of the server of kind
// ([udf.KindReduce] or [udf.KindReduceStream]) in dir: it waits for
// the kind's server-info file and socket there. Any other kind gives an error
// matching ErrKind. opts configure its connection ([udf.WithCalls] gives
// its calls their deadline).
func New(dir string, kind udf.Kind, log *zap.Logger, opts ...udf.Option) (*Client, error) {
	if kind != udf.KindReduce && kind != udf.KindReduceStream {
		return nil, fmt.Errorf("%w: %q (want %s or %s)", ErrKind, kind, udf.KindReduce, udf.KindReduceStream)
	}
	conn := udsconn.New(dir, kind, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := reducev1.NewReduceClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	return &Client{kind: kind, conn: conn}, nil
}

// Connect waits until the server is up and ready, or ctx ends. An incompatible
// server gives an error matching [udf.ErrIncompatible].
func (c *Client) Connect(ctx context.Context) error {
	_, _, err := c.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (c *Client) Ready() error { return c.conn.Ready() }

// Close closes the connection. Streams still open fail.
func (c *Client) Close() error { return c.conn.Close() }

// Reduce sends the messages of window w, each with its keys, ends the window
// and returns its results in the order they came. It is Open, Send for each
// message, CloseSend, and Recv until io.EOF, all one call with a deadline
// (see udf, Clients): past it the stream is cancelled and the error
// matches [udf.ErrDeadline].
func (c *Client) Reduce(ctx context.Context, w Window, in []Message) ([]Result, error) {
	if _, _, err := c.conn.Get(ctx); err != nil {
		return nil, fmt.Errorf("reduce: window %s: %w", w, err)
	}
	call := c.conn.Begin("ReduceFn", len(in))
	out, err := c.reduce(ctx, call, w, in)
	return out, call.End(err)
}

func (c *Client) reduce(ctx context.Context, call *udsconn.Call, w Window, in []Message) ([]Result, error) {
	s, err := c.open(ctx, w, call)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sent := make(chan error, 1)
	go func() { sent <- s.sendAll(in) }()
	var out []Result
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.cancel() // a Send still waiting returns
			<-sent
			return nil, err
		}
		out = append(out, r)
	}
	if err := <-sent; err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Stream) sendAll(in []Message) error {
	for _, m := range in {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	return s.CloseSend()
}
