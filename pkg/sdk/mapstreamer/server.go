package mapstreamer

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/mapwire"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a MapStreamer as a streaming map UDF: gRPC service
// map.v1.Map on mapstream.sock, server-info file mapper-server-info with
// MAP_MODE stream-map.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for ms, which must not be nil.
func NewServer(ms MapStreamer, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindMapStream, cfg)
	mapv1.RegisterMapServer(srv.Registrar(), &service{ms: ms, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if MapStream panicked (the server then shuts down, so that the process
// can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements map.v1.Map for map stream: each request, handled in
// its own goroutine, is answered by one response per message, then by a
// response with status{eot: true}, all carrying the request's id.
type service struct {
	mapv1.UnimplementedMapServer
	ms  MapStreamer
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*mapv1.ReadyResponse, error) {
	return &mapv1.ReadyResponse{Ready: s.srv.ReadyFor(s.ms)}, nil
}

func (s *service) MapFn(stream mapv1.Map_MapFnServer) error {
	ws := mapwire.NewStream(stream)
	if err := udfserver.Handshake(ws, mapwire.IsHandshake, mapwire.HandshakeEcho()); err != nil {
		return err
	}
	return udfserver.ServeConcurrent(ws, s.streamOne)
}

func (s *service) streamOne(ctx context.Context, d *mapwire.Request, send func(*mapwire.Response) error) error {
	if !d.HasMessage() {
		return udfserver.InvalidRequest("map stream request without a message")
	}
	produce := func(out chan<- Message) { s.ms.MapStream(ctx, d.Keys(), d, out) }
	forward := func(m Message) error {
		return send(mapwire.GetResponse(d.ID(), []Message{m}))
	}
	if err := udfserver.Forward(s.srv, produce, forward); err != nil {
		return err
	}
	return send(mapwire.EOT(d.ID()))
}
