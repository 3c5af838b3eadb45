package sideinputclient

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/udsconn"
	sideinputv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sideinput/v1"
	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Client is a [sideinputs.Retriever] that asks a side-input container over
// sideinput.v1, on the socket its server-info file in a directory names. It
// is safe for concurrent use.
type Client struct {
	conn *udsconn.Conn
}

var _ sideinputs.Retriever = (*Client)(nil)

// New returns a client of the server whose files ([udf.KindSideInput]) are
// in dir; it connects at the first Retrieve, and again after a failure. opts
// configure its connection ([udf.WithCalls] gives its calls their deadline).
func New(dir string, log *zap.Logger, clk clock.Clock, opts ...udf.Option) *Client {
	if clk == nil {
		clk = clock.Real()
	}
	opts = append([]udf.Option{udsconn.WithClock(clk)}, opts...)
	return &Client{conn: udsconn.New(dir, udf.KindSideInput, isReady, log, opts...)}
}

func isReady(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
	r, err := sideinputv1.NewSideInputClient(cc).IsReady(ctx, &emptypb.Empty{})
	return r.GetReady(), err
}

// Retrieve connects if needed (waiting for the server until ctx ends) and
// calls RetrieveSideInput, a call with a deadline (see udf, Clients): past
// it the error matches [udf.ErrDeadline]. It implements
// [sideinputs.Retriever].
func (r *Client) Retrieve(ctx context.Context) ([]byte, bool, error) {
	var resp *sideinputv1.SideInputResponse
	err := r.conn.Unary(ctx, "RetrieveSideInput", 0, func(cctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = sideinputv1.NewSideInputClient(cc).RetrieveSideInput(cctx, &emptypb.Empty{})
		if err != nil && cctx.Err() == nil {
			r.conn.Broken(cc, err)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return resp.GetValue(), !resp.GetNoBroadcast(), nil
}

// Ready returns nil while connected, else what the connection waits for.
func (r *Client) Ready() error { return r.conn.Ready() }

// Close closes the connection.
func (r *Client) Close() error { return r.conn.Close() }
