package reducestreamer

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/reduceserve"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a ReduceStreamer as a reduce-stream UDF: gRPC service
// reduce.v1.Reduce on reducestream.sock, server-info file
// reducestreamer-server-info.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for rs, which must not be nil.
func NewServer(rs ReduceStreamer, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindReduceStream, cfg)
	reducev1.RegisterReduceServer(srv.Registrar(), &service{rs: rs, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if ReduceStream panicked (the server then shuts down, so that the
// process can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements reduce.v1.Reduce: one task per window and keys, whose
// results are sent as ReduceStream hands them over.
type service struct {
	reducev1.UnimplementedReduceServer
	rs  ReduceStreamer
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*reducev1.ReadyResponse, error) {
	return &reducev1.ReadyResponse{Ready: s.srv.Ready()}, nil
}

func (s *service) ReduceFn(stream reducev1.Reduce_ReduceFnServer) error {
	return reduceserve.Serve(s.srv, stream, s.reduceStream)
}

// reduceStream runs ReduceStream, already under the server's Call, and emits
// each message it hands over; once emitting has failed, the rest are dropped
// so that ReduceStream can return.
func (s *service) reduceStream(ctx context.Context, keys []string, in <-chan Datum, md Metadata, emit func(Message) error) {
	out := make(chan Message)
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		s.rs.ReduceStream(ctx, keys, in, out, md)
	}()
	src := (<-chan Message)(out)
	var err error
	for {
		select {
		case m, ok := <-src:
			if !ok {
				src = nil // closed by ReduceStream; wait for it to return
				continue
			}
			if err == nil {
				err = emit(m)
			}
		case <-done:
			if panicked != nil {
				panic(panicked) // the server's Call turns it into the stream's error
			}
			return
		}
	}
}
