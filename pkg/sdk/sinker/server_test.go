package sinker_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

func start(t *testing.T, kind serverinfo.Kind, sk sinker.Sinker) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, kind, sinker.NewServer(sk, sinker.WithSocketDir(dir)).Start)
}

func open(t *testing.T, s *sdktest.Server) sinkv1.Sink_SinkFnClient {
	t.Helper()
	stream, err := sinkv1.NewSinkClient(s.Conn).SinkFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sinkv1.SinkRequest{Handshake: &sinkv1.Handshake{Sot: true}, Status: &sinkv1.TransmissionStatus{}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() || len(resp.GetResults()) != 0 {
		t.Fatalf("handshake echo = %v, %v", resp, err)
	}
	return stream
}

// sendBatch sends one request per value, with ids <prefix>-<i>, then eot;
// like a Numaflow runtime, it sets status{eot: false} on the requests.
func sendBatch(t *testing.T, stream sinkv1.Sink_SinkFnClient, prefix string, values ...string) {
	t.Helper()
	for i, v := range values {
		req := &sinkv1.SinkRequest{
			Request: &sinkv1.SinkRequest_Request{Id: fmt.Sprint(prefix, "-", i), Value: []byte(v), Keys: []string{"k"}},
			Status:  &sinkv1.TransmissionStatus{},
		}
		if err := stream.Send(req); err == io.EOF {
			return // the server ended the stream: its status comes from Recv
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
}

// recvBatch receives up to the eot and renders results "id:STATUS[:err]".
func recvBatch(t *testing.T, stream sinkv1.Sink_SinkFnClient) []string {
	t.Helper()
	var got []string
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v (after %v)", err, got)
		}
		if resp.GetStatus().GetEot() {
			if len(resp.GetResults()) != 0 {
				t.Errorf("eot response carries results: %v", resp)
			}
			return got
		}
		for _, r := range resp.GetResults() {
			s := r.GetId() + ":" + r.GetStatus().String()
			if r.GetErrMsg() != "" {
				s += ":" + r.GetErrMsg()
			}
			if r.ServeResponse != nil {
				s += ":" + string(r.GetServeResponse())
			}
			got = append(got, s)
		}
	}
}

// byPayload answers according to the payload: "ok", "fail", "fallback",
// "serve", "onsuccess"; "skip" gets no response.
var byPayload = sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var out sinker.Responses
	for d := range datums {
		switch v := string(d.Value()); v {
		case "ok":
			out = append(out, sinker.ResponseOK(d.ID()))
		case "fail":
			out = append(out, sinker.ResponseFailure(d.ID(), "broken"))
		case "fallback":
			out = append(out, sinker.ResponseFallback(d.ID()))
		case "serve":
			out = append(out, sinker.ResponseServe(d.ID(), []byte("served")))
		case "onsuccess":
			out = append(out, sinker.ResponseOnSuccess(d.ID()))
		}
	}
	return out
})

func TestBatches(t *testing.T) {
	s := start(t, serverinfo.KindSink, byPayload)
	stream := open(t, s)
	cases := []struct {
		name   string
		values []string
		want   string
	}{
		{"statuses", []string{"ok", "fail", "fallback", "serve", "onsuccess"},
			"[b0-0:SUCCESS b0-1:FAILURE:broken b0-2:FALLBACK b0-3:SERVE:served b0-4:ON_SUCCESS]"},
		{"empty batch", nil, "[]"},
		{"missing response fails", []string{"skip", "ok"},
			"[b2-0:FAILURE:sink returned no response for this message b2-1:SUCCESS]"},
		{"many", strings.Split(strings.Repeat("ok,", 300)+"ok", ","), ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sendBatch(t, stream, fmt.Sprint("b", i), c.values...)
			got := recvBatch(t, stream)
			if c.want != "" && fmt.Sprint(got) != c.want {
				t.Errorf("results %v\nwant %s", got, c.want)
			}
			if len(got) != len(c.values) {
				t.Errorf("%d results for %d messages", len(got), len(c.values))
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

func TestDatumFields(t *testing.T) {
	et := time.UnixMilli(1_700_000_000_000).UTC()
	got := make(chan string, 1)
	s := start(t, serverinfo.KindSink, sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			got <- fmt.Sprintf("%s %v %s %v %v %v", d.ID(), d.Keys(), d.Value(), d.EventTime(), d.Watermark().IsZero(), d.Headers())
			out = append(out, sinker.ResponseOK(d.ID()))
		}
		return out
	}))
	stream := open(t, s)
	req := &sinkv1.SinkRequest{Request: &sinkv1.SinkRequest_Request{
		Id: "x", Keys: []string{"a", "b"}, Value: []byte("v"), EventTime: timestamppb.New(et), Headers: map[string]string{"h": "1"},
	}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}}); err != nil {
		t.Fatal(err)
	}
	recvBatch(t, stream)
	want := fmt.Sprintf("x [a b] v %v true map[h:1]", et)
	if g := <-got; g != want {
		t.Errorf("datum %s, want %s", g, want)
	}
}

func TestHandshakeRequired(t *testing.T) {
	s := start(t, serverinfo.KindSink, byPayload)
	stream, err := sinkv1.NewSinkClient(s.Conn).SinkFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	sendBatch(t, stream, "x", "ok")
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Recv = %v, want InvalidArgument", err)
	}
}

// The container type selects the socket and server-info file.
func TestRoleFromContainerType(t *testing.T) {
	cases := []struct {
		containerType string
		kind          serverinfo.Kind
		socket        string
	}{
		{"", serverinfo.KindSink, "sink.sock"},
		{"udsink", serverinfo.KindSink, "sink.sock"},
		{"fb-udsink", serverinfo.KindFallbackSink, "fb-sink.sock"},
		{"ons-udsink", serverinfo.KindOnSuccessSink, "ons-sink.sock"},
	}
	for _, c := range cases {
		t.Run(string(c.kind)+"/"+c.containerType, func(t *testing.T) {
			t.Setenv(serverinfo.EnvContainerType, c.containerType)
			s := start(t, c.kind, byPayload)
			if !strings.HasSuffix(s.SocketPath(), "/"+c.socket) {
				t.Errorf("socket %s", s.SocketPath())
			}
			sdktest.AssertInfoFile(t, s.InfoPath(), c.kind)
			stream := open(t, s)
			sendBatch(t, stream, "r", "ok")
			if got := recvBatch(t, stream); fmt.Sprint(got) != "[r-0:SUCCESS]" {
				t.Errorf("results %v", got)
			}
		})
	}
}

func TestPanicStopsServer(t *testing.T) {
	t.Setenv(serverinfo.EnvContainerType, "fb-udsink")
	s := start(t, serverinfo.KindFallbackSink, sinker.SinkerFunc(func(context.Context, <-chan sinker.Datum) sinker.Responses {
		panic("sink boom")
	}))
	stream := open(t, s)
	sendBatch(t, stream, "b", "ok")
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "UDF_EXECUTION_ERROR(fb-udsink): sink boom" {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); err == nil {
		t.Fatal("Start returned nil after a panic")
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, serverinfo.KindSink, byPayload)
	ready, err := sinkv1.NewSinkClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindSink)
	if s.Info.Metadata != nil {
		t.Errorf("sink metadata = %v, want null", s.Info.Metadata)
	}
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestResponse(t *testing.T) {
	cases := []struct {
		r      sinker.Response
		ok, fb bool
		err    string
	}{
		{sinker.ResponseOK("1"), true, false, ""},
		{sinker.ResponseFailure("1", "e"), false, false, "e"},
		{sinker.ResponseFallback("1"), false, true, ""},
		{sinker.ResponseServe("1", nil), true, false, ""},
		{sinker.ResponseOnSuccess("1"), true, false, ""},
	}
	for i, c := range cases {
		if c.r.ID() != "1" || c.r.OK() != c.ok || c.r.IsFallback() != c.fb || c.r.Err() != c.err {
			t.Errorf("case %d: %+v", i, c.r)
		}
	}
}
