package sourcer_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

var eventTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// listSource hands out "m0", "m1", ... (offsets "0", "1", ..., partition 7),
// as many as asked, or extra more than asked; it reports acks and nacks.
type listSource struct {
	extra   uint64
	next    int
	acks    chan []sourcer.Offset
	nacks   chan []sourcer.Offset
	reads   chan sourcer.ReadRequest
	pending int64
	panicky bool
}

func newListSource() *listSource {
	return &listSource{acks: make(chan []sourcer.Offset, 10), nacks: make(chan []sourcer.Offset, 10), reads: make(chan sourcer.ReadRequest, 10), pending: 42}
}

func (s *listSource) Read(_ context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	s.reads <- req
	for range req.Count + s.extra {
		m := sourcer.Message{
			Value:   fmt.Appendf(nil, "m%d", s.next),
			Offset:  sourcer.Offset{Value: fmt.Append(nil, s.next), PartitionID: 7},
			Keys:    []string{"k"},
			Headers: map[string]string{"n": fmt.Sprint(s.next)},
		}
		if s.next%2 == 0 {
			m.EventTime = eventTime
		}
		out <- m
		s.next++
	}
}

func (s *listSource) Ack(_ context.Context, offsets []sourcer.Offset)  { s.acks <- offsets }
func (s *listSource) Nack(_ context.Context, offsets []sourcer.Offset) { s.nacks <- offsets }
func (s *listSource) Partitions(context.Context) []int32               { return []int32{3, 4} }
func (s *listSource) Pending(context.Context) int64 {
	if s.panicky {
		panic("pending boom")
	}
	return s.pending
}

func start(t *testing.T, src sourcer.Sourcer) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindSource, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
}

func openRead(t *testing.T, s *sdktest.Server) sourcev1.Source_ReadFnClient {
	t.Helper()
	stream, err := sourcev1.NewSourceClient(s.Conn).ReadFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sourcev1.ReadRequest{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetStatus()
	if !resp.GetHandshake().GetSot() || st == nil || st.GetEot() || st.GetCode() != sourcev1.ReadResponse_Status_SUCCESS || resp.Result != nil {
		t.Fatalf("handshake echo = %v, want handshake with status{eot: false, code: SUCCESS}", resp)
	}
	return stream
}

// read sends a read request and renders the results up to the eot.
func read(t *testing.T, stream sourcev1.Source_ReadFnClient, n uint64) []string {
	t.Helper()
	if err := stream.Send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: n, TimeoutInMs: 250}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v (after %v)", err, got)
		}
		if resp.GetStatus().GetEot() {
			if resp.Result != nil || resp.GetStatus().GetCode() != sourcev1.ReadResponse_Status_SUCCESS {
				t.Errorf("eot response = %v", resp)
			}
			return got
		}
		r := resp.GetResult()
		if resp.GetStatus().GetCode() != sourcev1.ReadResponse_Status_SUCCESS || r.GetEventTime() == nil {
			t.Errorf("result response = %v", resp)
		}
		et := "now"
		if r.GetEventTime().AsTime().Equal(eventTime) {
			et = "set"
		}
		got = append(got, fmt.Sprintf("%s@%s/%d %v %v %s", r.GetPayload(), r.GetOffset().GetOffset(), r.GetOffset().GetPartitionId(), r.GetKeys(), r.GetHeaders(), et))
	}
}

func TestRead(t *testing.T) {
	src := newListSource()
	s := start(t, src)
	stream := openRead(t, s)
	got := read(t, stream, 3)
	want := "[m0@0/7 [k] map[n:0] set m1@1/7 [k] map[n:1] now m2@2/7 [k] map[n:2] set]"
	if fmt.Sprint(got) != want {
		t.Errorf("read 3 = %v\nwant %s", got, want)
	}
	if req := <-src.reads; req != (sourcer.ReadRequest{Count: 3, Timeout: 250 * time.Millisecond}) {
		t.Errorf("Read got %+v", req)
	}
	// The stream is reused; a zero count is answered with the eot alone.
	if got := read(t, stream, 0); len(got) != 0 {
		t.Errorf("read 0 = %v", got)
	}
	if got := read(t, stream, 1); len(got) != 1 {
		t.Errorf("read 1 = %v", got)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
}

// A Read that sends more than asked has the extra messages dropped.
func TestReadCapped(t *testing.T) {
	src := newListSource()
	src.extra = 5
	s := start(t, src)
	if got := read(t, openRead(t, s), 2); len(got) != 2 {
		t.Fatalf("read 2 = %v", got)
	}
}

func TestAck(t *testing.T) {
	src := newListSource()
	s := start(t, src)
	stream, err := sourcev1.NewSourceClient(s.Conn).AckFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sourcev1.AckRequest{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() || resp.Result != nil {
		t.Fatalf("handshake echo = %v, %v", resp, err)
	}
	for i := range 3 {
		req := &sourcev1.AckRequest{Request: &sourcev1.AckRequest_Request{Offsets: []*sourcev1.Offset{
			{Offset: fmt.Append(nil, i), PartitionId: 1}, {Offset: []byte("x"), PartitionId: 2},
		}}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil || resp.GetResult().GetSuccess() == nil {
			t.Fatalf("ack response = %v, %v", resp, err)
		}
		if got, want := render(<-src.acks), fmt.Sprintf("[%d/1 x/2]", i); got != want {
			t.Errorf("Ack got %s", got)
		}
	}
}

// A Sourcer that is no OptionsNacker gets the offsets of every group of a
// nack in one Nack, without the options.
func TestNackPendingPartitions(t *testing.T) {
	src := newListSource()
	s := start(t, src)
	client := sourcev1.NewSourceClient(s.Conn)
	ctx := sdktest.Context(t)
	_, err := client.NackFn(ctx, &sourcev1.NackRequest{Request: []*sourcev1.NackRequest_Request{
		{Offsets: []*sourcev1.Offset{{Offset: []byte("a")}}},
		{Offsets: []*sourcev1.Offset{{Offset: []byte("b"), PartitionId: 1}, {Offset: []byte("c")}}, NackOptions: &common.NackOptions{Delay: proto.Uint64(9)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-src.nacks; len(got) != 3 || string(got[1].Value) != "b" || got[1].PartitionID != 1 {
		t.Errorf("Nack got %v", got)
	}
	pending, err := client.PendingFn(ctx, &emptypb.Empty{})
	if err != nil || pending.GetResult().GetCount() != 42 {
		t.Errorf("PendingFn = %v, %v", pending, err)
	}
	parts, err := client.PartitionsFn(ctx, &emptypb.Empty{})
	if err != nil || fmt.Sprint(parts.GetResult().GetPartitions()) != "[3 4]" {
		t.Errorf("PartitionsFn = %v, %v", parts, err)
	}
}

func TestHandshakeRequired(t *testing.T) {
	s := start(t, newListSource())
	client := sourcev1.NewSourceClient(s.Conn)
	t.Run("read", func(t *testing.T) {
		stream, err := client.ReadFn(sdktest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Recv = %v, want InvalidArgument", err)
		}
	})
	t.Run("ack", func(t *testing.T) {
		stream, err := client.AckFn(sdktest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&sourcev1.AckRequest{Request: &sourcev1.AckRequest_Request{}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Recv = %v, want InvalidArgument", err)
		}
	})
}

func TestPanicStopsServer(t *testing.T) {
	src := newListSource()
	src.panicky = true
	s := start(t, src)
	_, err := sourcev1.NewSourceClient(s.Conn).PendingFn(sdktest.Context(t), &emptypb.Empty{})
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(source): pending boom" {
		t.Fatalf("PendingFn = %v", err)
	}
	if err := s.Wait(t); err == nil {
		t.Fatal("Start returned nil after a panic")
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, newListSource())
	ready, err := sourcev1.NewSourceClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindSource)
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestDefaultPartitions(t *testing.T) {
	for env, want := range map[string]string{"": "[0]", "3": "[3]", "x": "[0]"} {
		t.Setenv(serverinfo.EnvReplica, env)
		if got := fmt.Sprint(sourcer.DefaultPartitions()); got != want {
			t.Errorf("NUMAFLOW_REPLICA=%q: %s, want %s", env, got, want)
		}
	}
}

func render(offsets []sourcer.Offset) string {
	var out []string
	for _, o := range offsets {
		out = append(out, fmt.Sprintf("%s/%d", o.Value, o.PartitionID))
	}
	return fmt.Sprint(out)
}
