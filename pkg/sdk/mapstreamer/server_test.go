package mapstreamer_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

func start(t *testing.T, ms mapstreamer.MapStreamer) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindMapStream, mapstreamer.NewServer(ms, mapstreamer.WithSocketDir(dir)).Start)
}

func open(t *testing.T, s *sdktest.Server) mapv1.Map_MapFnClient {
	t.Helper()
	stream, err := mapv1.NewMapClient(s.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&mapv1.MapRequest{Handshake: &mapv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("handshake echo = %v, %v", resp, err)
	}
	return stream
}

func send(t *testing.T, stream mapv1.Map_MapFnClient, id, value string) {
	t.Helper()
	if err := stream.Send(&mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Value: []byte(value), Keys: []string{"k-" + id}}}); err != nil && err != io.EOF {
		t.Fatal(err) // io.EOF: the server ended the stream, its status comes from Recv
	}
}

// words streams one message per comma-separated part; "wait" parts block
// until release is closed.
func words(release <-chan struct{}) mapstreamer.MapStreamerFunc {
	return func(ctx context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
		for _, w := range strings.Split(string(d.Value()), ",") {
			if w == "wait" {
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
			}
			out <- mapstreamer.NewMessage([]byte(w)).WithKeys(keys)
		}
	}
}

// collector gathers responses per id until the wanted ids have ended.
type collector map[string][]string

func (c collector) recvUntilEOT(t *testing.T, stream mapv1.Map_MapFnClient, ids ...string) {
	t.Helper()
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v (so far %v)", err, c)
		}
		id := resp.GetId()
		if resp.GetStatus().GetEot() {
			if len(resp.GetResults()) != 0 {
				t.Errorf("eot for %s carries results", id)
			}
			if !pending[id] {
				t.Fatalf("unexpected eot for %q (so far %v)", id, c)
			}
			delete(pending, id)
			c[id] = append(c[id], "EOT")
			continue
		}
		if len(resp.GetResults()) != 1 {
			t.Fatalf("response for %s has %d results, want 1", id, len(resp.GetResults()))
		}
		r := resp.GetResults()[0]
		if fmt.Sprint(r.GetKeys()) != "[k-"+id+"]" {
			t.Errorf("keys %v for %s", r.GetKeys(), id)
		}
		c[id] = append(c[id], string(r.GetValue()))
	}
}

func TestStreamsThenEOTPerRequest(t *testing.T) {
	release := make(chan struct{})
	s := start(t, words(release))
	stream := open(t, s)
	send(t, stream, "slow", "first,wait,last")
	send(t, stream, "a", "1,2,3")
	send(t, stream, "b", "4")
	got := collector{}
	// "a" and "b" complete while "slow" is blocked after its first message.
	got.recvUntilEOT(t, stream, "a", "b")
	close(release)
	got.recvUntilEOT(t, stream, "slow")
	want := map[string]string{"slow": "[first wait last EOT]", "a": "[1 2 3 EOT]", "b": "[4 EOT]"}
	for id, w := range want {
		if fmt.Sprint(got[id]) != w {
			t.Errorf("%s: %v, want %s", id, got[id], w)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
}

// A MapStream that closes out itself, as numaflow-go's asks, works too, and
// one that sends nothing still ends with an eot.
func TestOutClosedOrEmpty(t *testing.T) {
	s := start(t, mapstreamer.MapStreamerFunc(func(_ context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
		if string(d.Value()) == "close" {
			defer close(out)
			out <- mapstreamer.NewMessage([]byte("closed")).WithKeys(keys)
		}
	}))
	stream := open(t, s)
	send(t, stream, "c", "close")
	send(t, stream, "e", "empty")
	got := collector{}
	got.recvUntilEOT(t, stream, "c", "e")
	if fmt.Sprint(got["c"]) != "[closed EOT]" || fmt.Sprint(got["e"]) != "[EOT]" {
		t.Fatalf("got %v", got)
	}
}

func TestHandshakeRequired(t *testing.T) {
	s := start(t, words(nil))
	stream, err := mapv1.NewMapClient(s.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	send(t, stream, "1", "a")
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Recv = %v, want InvalidArgument", err)
	}
}

func TestPanicStopsServer(t *testing.T) {
	s := start(t, mapstreamer.MapStreamerFunc(func(_ context.Context, _ []string, _ mapstreamer.Datum, out chan<- mapstreamer.Message) {
		out <- mapstreamer.NewMessage([]byte("before"))
		panic("stream boom")
	}))
	stream := open(t, s)
	send(t, stream, "1", "a")
	resp, err := stream.Recv()
	if err != nil || string(resp.GetResults()[0].GetValue()) != "before" {
		t.Fatalf("first response = %v, %v", resp, err)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(mapstream): stream boom" {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); err == nil {
		t.Fatal("Start returned nil after a panic")
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, words(nil))
	ready, err := mapv1.NewMapClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindMapStream)
	if s.Info.Metadata[serverinfo.MapModeKey] != serverinfo.MapModeStream {
		t.Errorf("server info = %+v", s.Info)
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}
