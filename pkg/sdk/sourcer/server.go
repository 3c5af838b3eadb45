package sourcer

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a Sourcer as a user-defined source: gRPC service
// source.v1.Source on source.sock, server-info file sourcer-server-info.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for src, which must not be nil.
func NewServer(src Sourcer, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindSource, cfg)
	sourcev1.RegisterSourceServer(srv.Registrar(), &service{src: src, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if the Sourcer panicked (the server then shuts down, so that the
// process can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements source.v1.Source.
type service struct {
	sourcev1.UnimplementedSourceServer
	src Sourcer
	srv *udfserver.Server
}

var (
	readOK  = &sourcev1.ReadResponse_Status{Code: sourcev1.ReadResponse_Status_SUCCESS}
	readEOT = &sourcev1.ReadResponse_Status{Eot: true, Code: sourcev1.ReadResponse_Status_SUCCESS}
)

func (s *service) IsReady(context.Context, *emptypb.Empty) (*sourcev1.ReadyResponse, error) {
	ready := s.srv.ReadyFor(s.src)
	return &sourcev1.ReadyResponse{Ready: ready}, nil
}

// ReadFn answers each read request with its messages, then a response with
// status{eot: true}.
func (s *service) ReadFn(stream sourcev1.Source_ReadFnServer) error {
	isHandshake := func(r *sourcev1.ReadRequest) bool { return r.GetHandshake().GetSot() }
	echo := &sourcev1.ReadResponse{Handshake: &sourcev1.Handshake{Sot: true}, Status: readOK}
	if err := udfserver.Handshake(stream, isHandshake, echo); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.GetRequest() == nil {
			return udfserver.InvalidRequest("read request without num_records")
		}
		if err := s.read(ctx, stream, req.GetRequest()); err != nil {
			return err
		}
		if err := stream.Send(&sourcev1.ReadResponse{Status: readEOT}); err != nil {
			return err
		}
	}
}

// read forwards the messages of one Read, at most NumRecords of them.
func (s *service) read(ctx context.Context, stream sourcev1.Source_ReadFnServer, r *sourcev1.ReadRequest_Request) error {
	req := ReadRequest{Count: r.GetNumRecords(), Timeout: time.Duration(r.GetTimeoutInMs()) * time.Millisecond}
	if req.Count == 0 {
		return nil
	}
	var sent uint64
	produce := func(out chan<- Message) { s.src.Read(ctx, req, out) }
	forward := func(m Message) error {
		if sent == req.Count {
			return nil // over the count: dropped, to be read again
		}
		sent++
		return stream.Send(&sourcev1.ReadResponse{Result: result(m), Status: readOK})
	}
	return udfserver.Forward(s.srv, produce, forward)
}

func result(m Message) *sourcev1.ReadResponse_Result {
	et := m.EventTime
	if et.IsZero() {
		et = time.Now()
	}
	return &sourcev1.ReadResponse_Result{
		Payload:   m.Value,
		Offset:    &sourcev1.Offset{Offset: m.Offset.Value, PartitionId: m.Offset.PartitionID},
		EventTime: timestamppb.New(et),
		Keys:      m.Keys,
		Headers:   m.Headers,
		Metadata:  metadata.ToProto(m.UserMetadata),
	}
}

// AckFn answers each ack request, once Ack has returned, with a success.
func (s *service) AckFn(stream sourcev1.Source_AckFnServer) error {
	isHandshake := func(r *sourcev1.AckRequest) bool { return r.GetHandshake().GetSot() }
	echo := &sourcev1.AckResponse{Handshake: &sourcev1.Handshake{Sot: true}}
	if err := udfserver.Handshake(stream, isHandshake, echo); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		offsets := offsetsOf(req.GetRequest().GetOffsets())
		if err := s.srv.Call(func() { s.src.Ack(ctx, offsets) }); err != nil {
			return err
		}
		resp := &sourcev1.AckResponse{Result: &sourcev1.AckResponse_Result{Success: &emptypb.Empty{}}}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// NackFn passes the requests of the call, with their nack options, to one
// NackWithOptions if the Sourcer is an OptionsNacker; else it passes the
// offsets of every request to one Nack.
func (s *service) NackFn(ctx context.Context, req *sourcev1.NackRequest) (*sourcev1.NackResponse, error) {
	var call func()
	if on, ok := s.src.(OptionsNacker); ok {
		reqs := make([]NackRequest, len(req.GetRequest()))
		for i, r := range req.GetRequest() {
			reqs[i] = NackRequest{Offsets: offsetsOf(r.GetOffsets()), Options: nack.FromProto(r.GetNackOptions())}
		}
		call = func() { on.NackWithOptions(ctx, reqs) }
	} else {
		var offsets []Offset
		for _, r := range req.GetRequest() {
			offsets = append(offsets, offsetsOf(r.GetOffsets())...)
		}
		call = func() { s.src.Nack(ctx, offsets) }
	}
	if err := s.srv.Call(call); err != nil {
		return nil, err
	}
	return &sourcev1.NackResponse{Result: &sourcev1.NackResponse_Result{Success: &emptypb.Empty{}}}, nil
}

func (s *service) PendingFn(ctx context.Context, _ *emptypb.Empty) (*sourcev1.PendingResponse, error) {
	var n int64
	if err := s.srv.Call(func() { n = s.src.Pending(ctx) }); err != nil {
		return nil, err
	}
	return &sourcev1.PendingResponse{Result: &sourcev1.PendingResponse_Result{Count: n}}, nil
}

func (s *service) PartitionsFn(ctx context.Context, _ *emptypb.Empty) (*sourcev1.PartitionsResponse, error) {
	var p []int32
	if err := s.srv.Call(func() { p = s.src.Partitions(ctx) }); err != nil {
		return nil, err
	}
	return &sourcev1.PartitionsResponse{Result: &sourcev1.PartitionsResponse_Result{Partitions: p}}, nil
}

func offsetsOf(in []*sourcev1.Offset) []Offset {
	out := make([]Offset, len(in))
	for i, o := range in {
		out[i] = Offset{Value: o.GetOffset(), PartitionID: o.GetPartitionId()}
	}
	return out
}
