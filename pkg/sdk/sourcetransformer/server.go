package sourcetransformer

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/wire"
)

// Server serves a SourceTransformer: gRPC service
// sourcetransformer.v1.SourceTransform on sourcetransform.sock, server-info
// file sourcetransformer-server-info.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for st, which must not be nil.
func NewServer(st SourceTransformer, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindSourceTransformer, cfg)
	stv1.RegisterSourceTransformServer(srv.Registrar(), &service{st: st, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if Transform panicked (the server then shuts down, so that the process
// can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements sourcetransformer.v1.SourceTransform: requests are
// answered concurrently, each response carrying its request's id.
type service struct {
	stv1.UnimplementedSourceTransformServer
	st  SourceTransformer
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*stv1.ReadyResponse, error) {
	return &stv1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

func (s *service) SourceTransformFn(stream stv1.SourceTransform_SourceTransformFnServer) error {
	isHandshake := func(r *stv1.SourceTransformRequest) bool { return r.GetHandshake().GetSot() }
	echo := &stv1.SourceTransformResponse{Handshake: &stv1.Handshake{Sot: true}}
	if err := udfserver.Handshake(stream, isHandshake, echo); err != nil {
		return err
	}
	return udfserver.ServeConcurrent(stream, s.transformOne)
}

func (s *service) transformOne(ctx context.Context, req *stv1.SourceTransformRequest, send func(*stv1.SourceTransformResponse) error) error {
	m := req.GetRequest()
	if m == nil {
		return udfserver.InvalidRequest("transform request without a message")
	}
	msgs, err := s.callTransform(ctx, m)
	if err != nil {
		return err
	}
	results := make([]*stv1.SourceTransformResponse_Result, len(msgs))
	for i, msg := range msgs {
		results[i] = &stv1.SourceTransformResponse_Result{
			Keys:        msg.keys,
			Value:       msg.value,
			EventTime:   wire.Timestamp(msg.eventTime),
			Tags:        msg.tags,
			Metadata:    metadata.ToProto(msg.metadata),
			NackOptions: nack.ToProto(msg.nack),
		}
	}
	return send(&stv1.SourceTransformResponse{Id: m.GetId(), Results: results})
}

// callTransform calls the user's Transform on m.
func (s *service) callTransform(ctx context.Context, m *stv1.SourceTransformRequest_Request) (_ Messages, err error) {
	defer s.srv.Recover(&err)
	d := wire.NewDatum(wire.DatumFields{
		ID:        m.GetId(),
		Keys:      m.GetKeys(),
		Value:     m.GetValue(),
		EventTime: wire.Time(m.GetEventTime()),
		Watermark: wire.Time(m.GetWatermark()),
		Headers:   m.GetHeaders(),
		Metadata:  m.GetMetadata(),
	})
	return s.st.Transform(ctx, d.Keys(), d), nil
}
