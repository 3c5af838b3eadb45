package reducer

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/reduceserve"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a Reducer as a reduce UDF: gRPC service reduce.v1.Reduce on
// reduce.sock, server-info file reducer-server-info.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for r, which must not be nil.
func NewServer(r Reducer, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindReduce, cfg)
	reducev1.RegisterReduceServer(srv.Registrar(), &service{r: r, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if Reduce panicked (the server then shuts down, so that the process can
// exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements reduce.v1.Reduce: one task per window and keys, whose
// results are sent once Reduce returns.
type service struct {
	reducev1.UnimplementedReduceServer
	r   Reducer
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*reducev1.ReadyResponse, error) {
	return &reducev1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

func (s *service) ReduceFn(stream reducev1.Reduce_ReduceFnServer) error {
	return reduceserve.Serve(s.srv, stream, s.reduce)
}

func (s *service) reduce(ctx context.Context, keys []string, in <-chan Datum, md Metadata, emit func(Message) error) {
	for _, m := range s.r.Reduce(ctx, keys, in, md) {
		if emit(m) != nil {
			return
		}
	}
}
