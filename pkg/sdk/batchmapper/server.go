package batchmapper

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/mapwire"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
)

// Server serves a BatchMapper as a batch map UDF: gRPC service map.v1.Map
// on batchmap.sock, server-info file mapper-server-info with MAP_MODE
// batch-map.
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for bm, which must not be nil.
func NewServer(bm BatchMapper, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.KindBatchMap, cfg)
	mapv1.RegisterMapServer(srv.Registrar(), &service{bm: bm, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if BatchMap panicked (the server then shuts down, so that the process
// can exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements map.v1.Map for batch map: after the handshake, each
// batch is a run of requests ended by status{eot: true}, answered by one
// response per request id and then status{eot: true}.
type service struct {
	mapv1.UnimplementedMapServer
	bm  BatchMapper
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*mapv1.ReadyResponse, error) {
	ready := s.srv.ReadyFor(s.bm)
	return &mapv1.ReadyResponse{Ready: ready}, nil
}

func (s *service) MapFn(grpcStream mapv1.Map_MapFnServer) error {
	stream := mapwire.NewStream(grpcStream)
	if err := udfserver.Handshake(stream, mapwire.IsHandshake, mapwire.HandshakeEcho()); err != nil {
		return err
	}
	ctx := stream.Context()
	rx := udfserver.Receive(stream)
	for {
		var resps BatchResponses
		consume := func(datums <-chan Datum) error {
			return s.srv.Call(func() { resps = s.bm.BatchMap(ctx, datums) })
		}
		batch, end, err := udfserver.ReadBatch(rx, frame, consume)
		if err != nil {
			return err
		}
		if end && len(batch) == 0 {
			return nil
		}
		if err := answer(stream, batch, resps); err != nil {
			return err
		}
		if err := stream.Send(mapwire.EOT("")); err != nil {
			return err
		}
		if end {
			return nil
		}
	}
}

func frame(r *mapwire.Request) (udfserver.Framed[Datum], error) {
	f := udfserver.Framed[Datum]{EOT: mapwire.IsEOT(r)}
	if r.HasMessage() {
		f.Datum, f.HasDatum = r, true
	} else if !f.EOT {
		return f, udfserver.InvalidRequest("batch map request with neither a message nor status eot")
	}
	return f, nil
}

// answer sends one response per datum of batch, in the batch's order. The
// batch map function must have answered every datum and nothing else.
func answer(stream mapwire.Stream, batch []Datum, resps BatchResponses) error {
	at := make(map[string]int, len(batch))
	for i, d := range batch {
		at[d.ID()] = i
	}
	msgs := make([]Messages, len(batch))
	answered := make([]bool, len(batch))
	for _, r := range resps {
		i, ok := at[r.id]
		if !ok {
			return status.Error(codes.Internal, fmt.Sprintf("batch map answered id %q, which is not in the batch", r.id))
		}
		if answered[i] {
			msgs[i] = append(slices.Clip(msgs[i]), r.messages...)
		} else {
			msgs[i], answered[i] = r.messages, true
		}
	}
	for i, d := range batch {
		if !answered[i] {
			return status.Error(codes.Internal, fmt.Sprintf("batch map did not answer id %q (%d responses for %d messages)", d.ID(), len(resps), len(batch)))
		}
	}
	var resp mapwire.Response // encoded by Send: reused
	for i, d := range batch {
		mapwire.SetResponse(&resp, d.ID(), msgs[i])
		if err := stream.Send(&resp); err != nil {
			return err
		}
	}
	return nil
}
