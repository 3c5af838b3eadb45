package sourceclient

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/udsconn"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

// Client is the runtime's side of a user-defined source served over source.v1
// on a unix socket: an [isb.Reader]. Read asks the server for as many records
// as the buffer holds — the tokens the forwarder was granted — and Ack acks
// their offsets on the ack stream. Messages read and not acked are the
// source's to deliver again.
type Client struct {
	conn        *udsconn.Conn
	read        *udsconn.Stream[sourcev1.ReadRequest, sourcev1.ReadResponse]
	ack         *udsconn.Stream[sourcev1.AckRequest, sourcev1.AckResponse]
	readTimeout time.Duration
}

var (
	_ isb.Reader          = (*Client)(nil)
	_ isb.Nacker          = (*Client)(nil)
	_ isb.OptionsNacker   = (*Client)(nil)
	_ isb.PartitionReader = (*Client)(nil)
)

// Partition returns the partition of m's offset, as the source gave it. It
// implements [isb.PartitionReader].
func (s *Client) Partition(m *isb.ReadMessage) int32 {
	if o, ok := m.Handle.(*sourcev1.Offset); ok {
		return o.GetPartitionId()
	}
	return 0
}

// OnPartitionsGone implements [isb.PartitionReader]: a user-defined source
// does not say when partitions go, so f is never called.
func (*Client) OnPartitionsGone(func(partitions []int32)) {}

// ErrRead is matched by read failures the source reports in its answer.
var ErrRead = errors.New("user-defined source failed the read")

// New returns a client, not yet connected, of the user-defined source served
// in dir (its server-info file and socket of [udf.KindSource]); a read waits
// at most readTimeout for records, and the deadline of a read comes that much
// after the others'. opts configure its connection ([udf.WithCalls] gives its
// calls their deadline).
func New(dir string, readTimeout time.Duration, log *zap.Logger, opts ...udf.Option) *Client {
	s := &Client{readTimeout: readTimeout}
	s.conn = udsconn.New(dir, udf.KindSource, func(ctx context.Context, cc *grpc.ClientConn) (bool, error) {
		resp, err := sourcev1.NewSourceClient(cc).IsReady(ctx, &emptypb.Empty{})
		return resp.GetReady(), err
	}, log, opts...)
	s.read = udsconn.NewStream[sourcev1.ReadRequest, sourcev1.ReadResponse](s.conn)
	s.read.Name, s.read.Allowance = "ReadFn", readTimeout
	s.read.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[sourcev1.ReadRequest, sourcev1.ReadResponse], error) {
		return sourcev1.NewSourceClient(cc).ReadFn(ctx)
	}
	s.read.Handshake = func() *sourcev1.ReadRequest {
		return &sourcev1.ReadRequest{Handshake: &sourcev1.Handshake{Sot: true}}
	}
	s.read.Echoed = func(m *sourcev1.ReadResponse) bool { return m.GetHandshake().GetSot() }
	// At shutdown the read in flight may take its timeout to finish.
	s.read.Grace = readTimeout + udsconn.DefaultGrace
	s.ack = udsconn.NewStream[sourcev1.AckRequest, sourcev1.AckResponse](s.conn)
	s.ack.Name = "AckFn"
	s.ack.Open = func(ctx context.Context, cc *grpc.ClientConn) (grpc.BidiStreamingClient[sourcev1.AckRequest, sourcev1.AckResponse], error) {
		return sourcev1.NewSourceClient(cc).AckFn(ctx)
	}
	s.ack.Handshake = func() *sourcev1.AckRequest {
		return &sourcev1.AckRequest{Handshake: &sourcev1.Handshake{Sot: true}}
	}
	s.ack.Echoed = func(m *sourcev1.AckResponse) bool { return m.GetHandshake().GetSot() }
	return s
}

// Connect waits until the server is up and ready, or ctx ends. An
// incompatible server gives an error matching [udf.ErrIncompatible].
func (s *Client) Connect(ctx context.Context) error {
	_, _, err := s.conn.Get(ctx)
	return err
}

// Ready returns nil while the server is connected, or why not.
func (s *Client) Ready() error { return s.conn.Ready() }

// Close closes the connection.
func (s *Client) Close() error {
	s.read.Close()
	s.ack.Close()
	return s.conn.Close()
}

// Pending asks the source how many messages are pending: not yet read, or due
// to be read again. It is [isb.PendingUnknown] when the source cannot tell
// (it answers a negative count), and an error while the server is not
// connected, is stuck (see udf, Clients) or fails the call; it does not wait
// for the server to connect.
func (s *Client) Pending(ctx context.Context) (int64, error) {
	if err := s.conn.Ready(); err != nil {
		return isb.PendingUnknown, err
	}
	var resp *sourcev1.PendingResponse
	err := s.conn.Unary(ctx, "PendingFn", 0, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = sourcev1.NewSourceClient(cc).PendingFn(ctx, &emptypb.Empty{})
		return err
	})
	if err != nil {
		return isb.PendingUnknown, udsconn.Wrap("user-defined source pending", err)
	}
	if n := resp.GetResult().GetCount(); n >= 0 {
		return n, nil
	}
	return isb.PendingUnknown, nil
}

// Read asks the source for len(buf) records, waiting at most the read timeout.
func (s *Client) Read(ctx context.Context, buf []isb.ReadMessage) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	n := 0
	send := func(send func(*sourcev1.ReadRequest) error) error {
		return send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{
			NumRecords: uint64(len(buf)), TimeoutInMs: uint32(s.readTimeout.Milliseconds())}})
	}
	recv := func(resp *sourcev1.ReadResponse) (bool, error) {
		if st := resp.GetStatus(); st.GetCode() == sourcev1.ReadResponse_Status_FAILURE {
			return true, fmt.Errorf("%w: %s", ErrRead, st.GetMsg())
		}
		if r := resp.GetResult(); r != nil {
			if n == len(buf) {
				return true, fmt.Errorf("%w: more records than the %d asked for", udf.ErrProtocol, len(buf))
			}
			m := &buf[n]
			*m = isb.ReadMessage{Message: isb.Message{ID: offsetID(r.GetOffset()), Keys: r.GetKeys(), Value: r.GetPayload(),
				Headers: r.GetHeaders(), EventTime: r.GetEventTime().AsTime(), Metadata: isbproto.FromMetadata(r.GetMetadata())},
				Handle: r.GetOffset()}
			n++
		}
		return resp.GetStatus().GetEot(), nil
	}
	if err := s.read.Exchange(ctx, len(buf), send, recv); err != nil {
		if ctx.Err() != nil && n > 0 {
			// Shutting down mid-read: the records already read are not lost, the
			// source delivers unacked records again.
			return 0, nil
		}
		return 0, udsconn.Wrap("user-defined source", err)
	}
	return n, nil
}

// offsetID turns an offset into a message id: partition-hex(offset).
func offsetID(o *sourcev1.Offset) string {
	return strconv.Itoa(int(o.GetPartitionId())) + "-" + hex.EncodeToString(o.GetOffset())
}

// Ack acks the offsets of msgs.
func (s *Client) Ack(ctx context.Context, msgs []isb.ReadMessage) error {
	offsets := offsetsOf(msgs)
	if len(offsets) == 0 {
		return nil
	}
	send := func(send func(*sourcev1.AckRequest) error) error {
		return send(&sourcev1.AckRequest{Request: &sourcev1.AckRequest_Request{Offsets: offsets}})
	}
	recv := func(*sourcev1.AckResponse) (bool, error) { return true, nil }
	if err := s.ack.Exchange(ctx, len(offsets), send, recv); err != nil {
		return udsconn.Wrap("user-defined source ack", err)
	}
	return nil
}

// Nack hands msgs back to the source (NackFn), to be delivered again no sooner
// than delay.
func (s *Client) Nack(ctx context.Context, msgs []isb.ReadMessage, delay time.Duration) error {
	return s.NackOptions(ctx, msgs, isb.NackOptions{Delay: delay})
}

// NackOptions hands msgs back to the source (NackFn) with the options of the
// nack: its reason, delay, most deliveries and free-form values.
func (s *Client) NackOptions(ctx context.Context, msgs []isb.ReadMessage, opts isb.NackOptions) error {
	offsets := offsetsOf(msgs)
	if len(offsets) == 0 {
		return nil
	}
	err := s.conn.Unary(ctx, "NackFn", len(offsets), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := sourcev1.NewSourceClient(cc).NackFn(ctx, &sourcev1.NackRequest{Request: []*sourcev1.NackRequest_Request{
			{Offsets: offsets, NackOptions: isbproto.ToNackOptions(opts)}}})
		return err
	})
	if err != nil {
		return udsconn.Wrap("user-defined source nack", err)
	}
	return nil
}

// offsetsOf returns the offsets of msgs.
func offsetsOf(msgs []isb.ReadMessage) []*sourcev1.Offset {
	offsets := make([]*sourcev1.Offset, 0, len(msgs))
	for i := range msgs {
		if o, ok := msgs[i].Handle.(*sourcev1.Offset); ok {
			offsets = append(offsets, o)
		}
	}
	return offsets
}
