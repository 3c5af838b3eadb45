package reducestreamer_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	reducev1 "github.com/sluiceflow/sluice/pkg/apis/proto/reduce/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/udfserver"
	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
)

func start(t *testing.T, rs reducestreamer.ReduceStreamer) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindReduceStream, reducestreamer.NewServer(rs, reducestreamer.WithSocketDir(dir)).Start)
}

func open(t *testing.T, s *sdktest.Server) reducev1.Reduce_ReduceFnClient {
	t.Helper()
	stream, err := reducev1.NewReduceClient(s.Conn).ReduceFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// Results go out as they are made: the count of ten messages arrives while
// the window is still open, the rest once the stream is half-closed.
func TestStreamsBeforeTheWindowEnds(t *testing.T) {
	s := start(t, reducestreamer.ReduceStreamerFunc(countByTens))
	stream := open(t, s)
	w := sdktest.Window{Start: 0, End: 60_000}
	values := make([]string, 12)
	sdktest.SendWindow(t, stream, w, []string{"k"}, values...)
	if got := sdktest.RecvResult(t, stream); got != "0-60000 k=10" {
		t.Fatalf("first result %q, want the count of ten before the window ends", got)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, []string{"0-60000 k=2"}) {
		t.Errorf("results at the end %q", got)
	}
}

// A ReduceStream that closes out itself works too, and one that panics fails
// the stream and stops the server.
func TestCloseAndPanic(t *testing.T) {
	s := start(t, reducestreamer.ReduceStreamerFunc(func(_ context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
		for d := range in {
			if string(d.Value()) == "boom" {
				panic("stream boom")
			}
			out <- reducestreamer.NewMessage(d.Value()).WithKeys(keys)
		}
		close(out)
	}))
	stream := open(t, s)
	sdktest.SendWindow(t, stream, sdktest.Window{Start: 0, End: 10}, []string{"k"}, "a", "b")
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := sdktest.RecvAll(t, stream); !slices.Equal(got, []string{"0-10 k=a", "0-10 k=b"}) {
		t.Errorf("results %q", got)
	}

	stream = open(t, s)
	sdktest.SendWindow(t, stream, sdktest.Window{Start: 0, End: 10}, []string{"k"}, "boom")
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(reducestream): stream boom" {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); !errors.Is(err, udfserver.ErrUDFPanic) {
		t.Fatalf("Start = %v, want ErrUDFPanic", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, reducestreamer.ReduceStreamerFunc(countByTens))
	ready, err := reducev1.NewReduceClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	if s.SocketPath() != s.Dir+"/reducestream.sock" || s.InfoPath() != s.Dir+"/reducestreamer-server-info" {
		t.Errorf("socket %s, server-info file %s", s.SocketPath(), s.InfoPath())
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindReduceStream)
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}
