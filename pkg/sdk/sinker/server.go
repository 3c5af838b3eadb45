package sinker

import (
	"context"
	"os"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/wire"
)

// missingResult is the error message of a datum Sink gave no Response for.
const missingResult = "sink returned no response for this message"

// Server serves a Sinker as a user-defined sink: gRPC service sink.v1.Sink.
// Its socket and server-info file depend on the role the runtime gives the
// container through NUMAFLOW_UD_CONTAINER_TYPE: sink.sock and
// sinker-server-info by default, fb-sink.sock and fb-sinker-server-info for
// "fb-udsink" (fallback sink), ons-sink.sock and ons-sinker-server-info for
// "ons-udsink" (on-success sink).
type Server struct {
	srv *udfserver.Server
}

// NewServer returns a server for sk, which must not be nil. It reads
// NUMAFLOW_UD_CONTAINER_TYPE to choose its socket.
func NewServer(sk Sinker, opts ...Option) *Server {
	var cfg udfserver.Config
	for _, o := range opts {
		o(&cfg)
	}
	srv := udfserver.New(serverinfo.SinkKind(os.Getenv(serverinfo.EnvContainerType)), cfg)
	sinkv1.RegisterSinkServer(srv.Registrar(), &service{sk: sk, srv: srv})
	return &Server{srv: srv}
}

// Start listens on the socket, writes the server-info file once listening,
// and serves until ctx ends or the process gets SIGTERM or SIGINT; then it
// stops gracefully and removes the socket and the server-info file. It
// returns nil after such a stop, and an error if the server could not start
// or if Sink panicked (the server then shuts down, so that the process can
// exit and be restarted). A Server starts once.
func (s *Server) Start(ctx context.Context) error { return s.srv.Run(ctx) }

// service implements sink.v1.Sink: after the handshake, each batch is a run
// of requests ended by status{eot: true}, answered by a response with the
// results and then one with status{eot: true}.
type service struct {
	sinkv1.UnimplementedSinkServer
	sk  Sinker
	srv *udfserver.Server
}

func (s *service) IsReady(context.Context, *emptypb.Empty) (*sinkv1.ReadyResponse, error) {
	ready := s.srv.ReadyFor(s.sk)
	return &sinkv1.ReadyResponse{Ready: ready}, nil
}

func (s *service) SinkFn(stream sinkv1.Sink_SinkFnServer) error {
	isHandshake := func(r *sinkv1.SinkRequest) bool { return r.GetHandshake().GetSot() }
	echo := &sinkv1.SinkResponse{Handshake: &sinkv1.Handshake{Sot: true}}
	if err := udfserver.Handshake(stream, isHandshake, echo); err != nil {
		return err
	}
	ctx := stream.Context()
	rx := udfserver.Receive(stream)
	for {
		var resps Responses
		consume := func(datums <-chan Datum) error {
			return s.srv.Call(func() { resps = s.sk.Sink(ctx, datums) })
		}
		batch, end, err := udfserver.ReadBatch(rx, frame, consume)
		if err != nil {
			return err
		}
		if end && len(batch) == 0 {
			return nil
		}
		if len(batch) > 0 {
			if err := stream.Send(&sinkv1.SinkResponse{Results: results(batch, resps)}); err != nil {
				return err
			}
		}
		if err := stream.Send(&sinkv1.SinkResponse{Status: &sinkv1.TransmissionStatus{Eot: true}}); err != nil {
			return err
		}
		if end {
			return nil
		}
	}
}

func frame(r *sinkv1.SinkRequest) (udfserver.Framed[Datum], error) {
	f := udfserver.Framed[Datum]{EOT: r.GetStatus().GetEot()}
	if m := r.GetRequest(); m != nil {
		f.HasDatum = true
		f.Datum = wire.NewDatum(wire.DatumFields{
			ID:        m.GetId(),
			Keys:      m.GetKeys(),
			Value:     m.GetValue(),
			EventTime: wire.Time(m.GetEventTime()),
			Watermark: wire.Time(m.GetWatermark()),
			Headers:   m.GetHeaders(),
			Metadata:  m.GetMetadata(),
		})
	} else if !f.EOT {
		return f, udfserver.InvalidRequest("sink request with neither a message nor status eot")
	}
	return f, nil
}

// results lists one result per datum of batch, in the batch's order: the
// Response Sink gave for its id (the last one, if several), or a failure.
// Responses for ids not in the batch are ignored.
func results(batch []Datum, resps Responses) []*sinkv1.SinkResponse_Result {
	byID := make(map[string]Response, len(resps))
	for _, r := range resps {
		byID[r.id] = r
	}
	out := make([]*sinkv1.SinkResponse_Result, len(batch))
	for i, d := range batch {
		r, ok := byID[d.ID()]
		if !ok {
			r = ResponseFailure(d.ID(), missingResult)
		}
		out[i] = r.result()
	}
	return out
}
