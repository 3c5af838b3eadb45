package mapper_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// start runs a map server for m in a new socket directory.
func start(t *testing.T, m mapper.Mapper, opts ...mapper.Option) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	srv := mapper.NewServer(m, append([]mapper.Option{mapper.WithSocketDir(dir)}, opts...)...)
	return sdktest.Start(t, dir, serverinfo.KindMap, srv.Start)
}

// open opens a MapFn stream and does the handshake.
func open(t *testing.T, s *sdktest.Server) mapv1.Map_MapFnClient {
	t.Helper()
	stream, err := mapv1.NewMapClient(s.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&mapv1.MapRequest{Handshake: &mapv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if !resp.GetHandshake().GetSot() || len(resp.GetResults()) != 0 {
		t.Fatalf("handshake echo = %v", resp)
	}
	return stream
}

func request(id string, value string, keys ...string) *mapv1.MapRequest {
	return &mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Keys: keys, Value: []byte(value)}}
}

var upper = mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	return mapper.Messages{mapper.NewMessage([]byte(strings.ToUpper(string(d.Value())))).WithKeys(keys)}
})

func TestHandshakeRequired(t *testing.T) {
	cases := []struct {
		name  string
		first *mapv1.MapRequest // nil: close the stream at once
	}{
		{"request first", request("1", "a")},
		{"handshake without sot", &mapv1.MapRequest{Handshake: &mapv1.Handshake{}}},
		{"closed before handshake", nil},
	}
	s := start(t, upper)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream, err := mapv1.NewMapClient(s.Conn).MapFn(sdktest.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			if c.first != nil {
				if err := stream.Send(c.first); err != nil {
					t.Fatal(err)
				}
			} else if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Recv = %v, want InvalidArgument", err)
			}
		})
	}
}

func TestMapFields(t *testing.T) {
	et := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	wm := et.Add(-time.Second)
	got := make(chan mapper.Datum, 1)
	s := start(t, mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		got <- d
		return mapper.Messages{
			mapper.NewMessage([]byte("a")).WithKeys([]string{"k1"}).WithTags([]string{"t1", "t2"}),
			mapper.MessageToDrop(),
			mapper.NewMessage([]byte("b")),
		}
	}))
	stream := open(t, s)
	err := stream.Send(&mapv1.MapRequest{Id: "req-1", Request: &mapv1.MapRequest_Request{
		Keys: []string{"x", "y"}, Value: []byte("payload"),
		EventTime: timestamppb.New(et), Watermark: timestamppb.New(wm),
		Headers: map[string]string{"h": "v"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d.ID() != "req-1" || fmt.Sprint(d.Keys()) != "[x y]" || string(d.Value()) != "payload" ||
		!d.EventTime().Equal(et) || !d.Watermark().Equal(wm) || d.Headers()["h"] != "v" {
		t.Errorf("datum: id %q keys %v value %q event time %v watermark %v headers %v",
			d.ID(), d.Keys(), d.Value(), d.EventTime(), d.Watermark(), d.Headers())
	}
	if resp.GetId() != "req-1" || resp.Status != nil || resp.Handshake != nil {
		t.Errorf("response framing: %v", resp)
	}
	want := []string{`[k1] "a" [t1 t2]`, `[] "" [U+005C__DROP__]`, `[] "b" []`}
	if len(resp.GetResults()) != len(want) {
		t.Fatalf("results = %v", resp.GetResults())
	}
	for i, r := range resp.GetResults() {
		if g := fmt.Sprintf("%v %q %v", r.GetKeys(), r.GetValue(), r.GetTags()); g != want[i] {
			t.Errorf("result %d = %s, want %s", i, g, want[i])
		}
	}
}

// A slow request does not hold back the answers to the requests after it,
// and every answer carries its request's id.
func TestConcurrentRequests(t *testing.T) {
	release := make(chan struct{})
	s := start(t, mapper.MapperFunc(func(ctx context.Context, keys []string, d mapper.Datum) mapper.Messages {
		if d.ID() == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return upper(ctx, keys, d)
	}))
	stream := open(t, s)
	const n = 50
	if err := stream.Send(request("slow", "slow")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := stream.Send(request(fmt.Sprint("id-", i), fmt.Sprint("value-", i), fmt.Sprint("key-", i))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetId()
		if id == "slow" {
			t.Fatal("the slow request was answered before it was released")
		}
		var i int
		if _, err := fmt.Sscanf(id, "id-%d", &i); err != nil || seen[id] {
			t.Fatalf("unexpected or repeated id %q", id)
		}
		seen[id] = true
		r := resp.GetResults()
		if len(r) != 1 || string(r[0].GetValue()) != fmt.Sprint("VALUE-", i) || fmt.Sprint(r[0].GetKeys()) != fmt.Sprintf("[key-%d]", i) {
			t.Errorf("response for %s: %v", id, r)
		}
	}
	close(release)
	resp, err := stream.Recv()
	if err != nil || resp.GetId() != "slow" || string(resp.GetResults()[0].GetValue()) != "SLOW" {
		t.Fatalf("slow response = %v, %v", resp, err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want EOF", err)
	}
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, upper)
	// The file appeared only once the socket was listening: the server
	// answers at once, and is ready.
	ready, err := mapv1.NewMapClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindMap)
	if s.Info.Metadata[serverinfo.MapModeKey] != serverinfo.MapModeUnary || serverinfo.Check(s.Info) != nil {
		t.Errorf("server info = %+v", s.Info)
	}
	if err := s.Stop(t); err != nil {
		t.Fatalf("Start = %v, want nil after cancellation", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestPanicStopsServer(t *testing.T) {
	s := start(t, mapper.MapperFunc(func(context.Context, []string, mapper.Datum) mapper.Messages {
		panic("boom")
	}))
	stream := open(t, s)
	if err := stream.Send(request("1", "x")); err != nil {
		t.Fatal(err)
	}
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(map): boom" {
		t.Fatalf("Recv = %v, want Internal UDF_EXECUTION_ERROR(map): boom", err)
	}
	err = s.Wait(t) // the server stops by itself
	if err == nil || !strings.Contains(err.Error(), "UDF_EXECUTION_ERROR(map): boom") {
		t.Fatalf("Start = %v, want the panic", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestPanicLabelIsContainerType(t *testing.T) {
	t.Setenv(serverinfo.EnvContainerType, "udf")
	s := start(t, mapper.MapperFunc(func(context.Context, []string, mapper.Datum) mapper.Messages {
		panic(errors.New("bad input"))
	}))
	stream := open(t, s)
	if err := stream.Send(request("1", "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Convert(err).Message() != "UDF_EXECUTION_ERROR(udf): bad input" {
		t.Fatalf("Recv = %v", err)
	}
	_ = s.Wait(t)
}

// On cancellation the server stops taking new streams but answers the
// requests in flight on the open ones.
func TestGracefulStop(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := start(t, mapper.MapperFunc(func(ctx context.Context, keys []string, d mapper.Datum) mapper.Messages {
		close(entered)
		<-release
		return upper(ctx, keys, d)
	}))
	stream := open(t, s)
	if err := stream.Send(request("1", "late")); err != nil {
		t.Fatal(err)
	}
	<-entered
	s.Cancel()
	// The server-info file goes first, so that no runtime connects anew.
	sdktest.WaitRemoved(t, s.InfoPath())
	close(release)
	resp, err := stream.Recv()
	if err != nil || string(resp.GetResults()[0].GetValue()) != "LATE" {
		t.Fatalf("in-flight request: %v, %v", resp, err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
	if err := s.Wait(t); err != nil {
		t.Fatalf("Start = %v", err)
	}
	sdktest.AssertRemoved(t, s.SocketPath())
}

// A stream the client keeps open does not hold the server beyond its
// shutdown timeout.
func TestShutdownTimeout(t *testing.T) {
	s := start(t, upper, mapper.WithShutdownTimeout(20*time.Millisecond))
	stream := open(t, s)
	if err := s.Stop(t); err != nil {
		t.Fatalf("Start = %v", err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv on the cut stream = %v, want Unavailable", err)
	}
}

func TestSocketDirFromEnv(t *testing.T) {
	dir := sdktest.Dir(t)
	t.Setenv("SLUICE_UDS_DIR", dir)
	s := sdktest.Start(t, dir, serverinfo.KindMap, mapper.NewServer(upper).Start)
	if _, err := mapv1.NewMapClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(s.SocketPath()) != "map.sock" {
		t.Errorf("socket %s", s.SocketPath())
	}
}
