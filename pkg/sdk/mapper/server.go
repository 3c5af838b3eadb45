package mapper

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/mapwire"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a Mapper as a unary map UDF: gRPC service map.v1.Map on
// map.sock, server-info file mapper-server-info with MAP_MODE unary-map.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for m, which must not be nil.
func NewServer(m Mapper, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindMap, cfg)
	mapv1.RegisterMapServer(srv.Registrar(), &service{m: m, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if Map panicked (the server then shuts down, so that the process can
// exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements map.v1.Map for unary map: requests are answered
// concurrently, each response carrying its request's id.
type service struct {
	mapv1.UnimplementedMapServer
	m   Mapper
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*mapv1.ReadyResponse, error) {
	ready := s.srv.ReadyFor(s.m)
	return &mapv1.ReadyResponse{Ready: ready}, nil
}

func (s *service) MapFn(stream mapv1.Map_MapFnServer) error {
	ws := mapwire.NewStream(stream)
	if err := udfserver.Handshake(ws, mapwire.IsHandshake, mapwire.HandshakeEcho()); err != nil {
		return err
	}
	return udfserver.ServeConcurrent(ws, s.mapOne)
}

func (s *service) mapOne(ctx context.Context, req *mapwire.Request, send func(*mapwire.Response) error) error {
	if !req.HasMessage() {
		return udfserver.InvalidRequest("map request without a message")
	}
	msgs, err := s.callMap(ctx, req)
	if err != nil {
		return err
	}
	return send(mapwire.GetResponse(req.ID(), msgs))
}

// callMap calls the user's Map on req's message.
func (s *service) callMap(ctx context.Context, d *mapwire.Request) (_ Messages, err error) {
	defer s.srv.Recover(&err)
	return s.m.Map(ctx, d.Keys(), d), nil
}
