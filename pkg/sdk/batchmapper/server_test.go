package batchmapper_test

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
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

func start(t *testing.T, bm batchmapper.BatchMapper) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindBatchMap, batchmapper.NewServer(bm, batchmapper.WithSocketDir(dir)).Start)
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

// sendBatch sends one request per value, with ids <prefix>-<i>, then eot.
// A server that ends the stream early (a handler that panics at the first
// message) makes Send report io.EOF: sending stops, and the stream's status
// comes from Recv.
func sendBatch(t *testing.T, stream mapv1.Map_MapFnClient, prefix string, values ...string) {
	t.Helper()
	for i, v := range values {
		req := &mapv1.MapRequest{Id: fmt.Sprint(prefix, "-", i), Request: &mapv1.MapRequest_Request{Value: []byte(v), Keys: []string{"k"}}}
		if err := stream.Send(req); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&mapv1.MapRequest{Status: &mapv1.TransmissionStatus{Eot: true}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
}

// recvBatch receives responses up to the eot and renders them
// "id:value,value" in arrival order.
func recvBatch(t *testing.T, stream mapv1.Map_MapFnClient) []string {
	t.Helper()
	var got []string
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v (after %v)", err, got)
		}
		if resp.GetStatus().GetEot() {
			if resp.GetId() != "" || len(resp.GetResults()) != 0 {
				t.Errorf("eot response carries data: %v", resp)
			}
			return got
		}
		var vals []string
		for _, r := range resp.GetResults() {
			vals = append(vals, string(r.GetValue()))
		}
		got = append(got, resp.GetId()+":"+strings.Join(vals, ","))
	}
}

// splitter answers each datum with one message per comma-separated part,
// in reverse order of the batch (the server restores the batch's order).
var splitter = batchmapper.BatchMapperFunc(func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
	var out batchmapper.BatchResponses
	for d := range datums {
		r := batchmapper.NewBatchResponse(d.ID())
		for _, part := range strings.Split(string(d.Value()), ",") {
			r = r.Append(batchmapper.NewMessage([]byte(part)).WithKeys(d.Keys()))
		}
		out = append(batchmapper.BatchResponses{r}, out...)
	}
	return out
})

func TestBatches(t *testing.T) {
	s := start(t, splitter)
	stream := open(t, s)
	cases := []struct {
		name   string
		values []string
		want   []string
	}{
		{"three", []string{"a", "b,c", "d"}, []string{"b0-0:a", "b0-1:b,c", "b0-2:d"}},
		{"empty batch", nil, nil},
		{"one", []string{"x,y,z"}, []string{"b2-0:x,y,z"}},
	}
	// Batch after batch on the same stream.
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sendBatch(t, stream, fmt.Sprint("b", i), c.values...)
			if got := recvBatch(t, stream); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("batch = %v, want %v", got, c.want)
			}
		})
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
}

func TestHandshakeRequired(t *testing.T) {
	s := start(t, splitter)
	stream, err := mapv1.NewMapClient(s.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	// The server may end the stream at the first request: Send then reports
	// io.EOF and the status comes from Recv.
	if err := stream.Send(&mapv1.MapRequest{Id: "x", Request: &mapv1.MapRequest_Request{Value: []byte("a")}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Recv = %v, want InvalidArgument", err)
	}
}

// A batch cut short by the end of the stream is still answered.
func TestEndOfStreamEndsBatch(t *testing.T) {
	s := start(t, splitter)
	stream := open(t, s)
	if err := stream.Send(&mapv1.MapRequest{Id: "1", Request: &mapv1.MapRequest_Request{Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := recvBatch(t, stream); fmt.Sprint(got) != "[1:v]" {
		t.Fatalf("batch = %v", got)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
}

func TestWrongAnswers(t *testing.T) {
	cases := []struct {
		name string
		bm   batchmapper.BatchMapperFunc
		want string
	}{
		{"missing id", func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
			for range datums {
			}
			return nil
		}, `did not answer id "b-0"`},
		{"unknown id", func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
			for range datums {
			}
			return batchmapper.BatchResponses{batchmapper.NewBatchResponse("other")}
		}, `answered id "other"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, c.bm)
			stream := open(t, s)
			sendBatch(t, stream, "b", "v")
			_, err := stream.Recv()
			if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Recv = %v, want Internal %s", err, c.want)
			}
			if !s.Running() {
				t.Error("a wrong answer must not stop the server")
			}
		})
	}
}

func TestPanicStopsServer(t *testing.T) {
	s := start(t, batchmapper.BatchMapperFunc(func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
		<-datums
		panic("batch boom")
	}))
	stream := open(t, s)
	sendBatch(t, stream, "b", "1", "2", "3")
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(batchmap): batch boom" {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); err == nil {
		t.Fatal("Start returned nil after a panic")
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, splitter)
	ready, err := mapv1.NewMapClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindBatchMap)
	if s.Info.Metadata[serverinfo.MapModeKey] != serverinfo.MapModeBatch || s.Info.MinimumNumaflowVersion != "" {
		t.Errorf("server info = %+v", s.Info)
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}
