package sessionreducer

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sessionreducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/sessionreduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a Creator's session reducers as a session reduce UDF: gRPC
// service sessionreduce.v1.SessionReduce on sessionreduce.sock, server-info
// file sessionreducer-server-info.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for c, which must not be nil.
func NewServer(c Creator, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindSessionReduce, cfg)
	sessionreducev1.RegisterSessionReduceServer(srv.Registrar(), &service{c: c, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if user code panicked (the server then shuts down, so that the process
// can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements sessionreduce.v1.SessionReduce.
type service struct {
	sessionreducev1.UnimplementedSessionReduceServer
	c   Creator
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*sessionreducev1.ReadyResponse, error) {
	return &sessionreducev1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

func (s *service) SessionReduceFn(stream sessionreducev1.SessionReduce_SessionReduceFnServer) error {
	return serve(s.srv, s.c, stream)
}
