package sourcetransformer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
)

var base = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func start(t *testing.T, st sourcetransformer.SourceTransformer) *sdktest.Server {
	t.Helper()
	dir := sdktest.Dir(t)
	return sdktest.Start(t, dir, serverinfo.KindSourceTransformer, sourcetransformer.NewServer(st, sourcetransformer.WithSocketDir(dir)).Start)
}

func open(t *testing.T, s *sdktest.Server) stv1.SourceTransform_SourceTransformFnClient {
	t.Helper()
	stream, err := stv1.NewSourceTransformClient(s.Conn).SourceTransformFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&stv1.SourceTransformRequest{Handshake: &stv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() || len(resp.GetResults()) != 0 {
		t.Fatalf("handshake echo = %v, %v", resp, err)
	}
	return stream
}

func request(id, value string, eventTime time.Time) *stv1.SourceTransformRequest {
	return &stv1.SourceTransformRequest{Request: &stv1.SourceTransformRequest_Request{
		Id: id, Value: []byte(value), Keys: []string{"k"}, EventTime: timestamppb.New(eventTime),
	}}
}

// shift moves each message's event time forward by the number of seconds in
// its payload; "slow" waits for release, "drop" is dropped.
func shift(release <-chan struct{}) sourcetransformer.SourceTransformerFunc {
	return func(ctx context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
		v := string(d.Value())
		switch v {
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
			}
		case "drop":
			return sourcetransformer.Messages{sourcetransformer.MessageToDrop(d.EventTime())}
		}
		var secs int
		_, _ = fmt.Sscan(v, &secs)
		out := sourcetransformer.NewMessage(d.Value(), d.EventTime().Add(time.Duration(secs)*time.Second)).
			WithKeys(append([]string{"t"}, keys...)).WithTags([]string{"tag"})
		return sourcetransformer.Messages{out}
	}
}

func TestIDsAndEventTimes(t *testing.T) {
	release := make(chan struct{})
	s := start(t, shift(release))
	stream := open(t, s)
	if err := stream.Send(request("slow", "slow", base)); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := stream.Send(request(fmt.Sprint(i), fmt.Sprint(i), base)); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(request("d", "drop", base)); err != nil {
		t.Fatal(err)
	}
	for range n + 1 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetId()
		if id == "slow" {
			t.Fatal("slow request answered before release")
		}
		r := resp.GetResults()
		if len(r) != 1 {
			t.Fatalf("%s: %d results", id, len(r))
		}
		if id == "d" {
			if fmt.Sprint(r[0].GetTags()) != "[U+005C__DROP__]" || !r[0].GetEventTime().AsTime().Equal(base) {
				t.Errorf("drop result %v", r[0])
			}
			continue
		}
		var i int
		if _, err := fmt.Sscan(id, &i); err != nil {
			t.Fatalf("unexpected id %q", id)
		}
		want := base.Add(time.Duration(i) * time.Second)
		if string(r[0].GetValue()) != id || !r[0].GetEventTime().AsTime().Equal(want) ||
			fmt.Sprint(r[0].GetKeys()) != "[t k]" || fmt.Sprint(r[0].GetTags()) != "[tag]" {
			t.Errorf("%s: result %v, want event time %v", id, r[0], want)
		}
	}
	close(release)
	if resp, err := stream.Recv(); err != nil || resp.GetId() != "slow" {
		t.Fatalf("slow response = %v, %v", resp, err)
	}
}

func TestHandshakeRequired(t *testing.T) {
	s := start(t, shift(nil))
	stream, err := stv1.NewSourceTransformClient(s.Conn).SourceTransformFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(request("1", "1", base)); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Recv = %v, want InvalidArgument", err)
	}
}

func TestPanicStopsServer(t *testing.T) {
	s := start(t, sourcetransformer.SourceTransformerFunc(func(context.Context, []string, sourcetransformer.Datum) sourcetransformer.Messages {
		var m map[string]int
		m["x"]++ // a runtime panic, not a string
		return nil
	}))
	stream := open(t, s)
	if err := stream.Send(request("1", "1", base)); err != nil {
		t.Fatal(err)
	}
	_, err := stream.Recv()
	if status.Code(err) != codes.Internal || !strings.HasPrefix(status.Convert(err).Message(), "UDF_EXECUTION_ERROR(sourcetransformer): assignment to entry in nil map") {
		t.Fatalf("Recv = %v", err)
	}
	if err := s.Wait(t); err == nil {
		t.Fatal("Start returned nil after a panic")
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestServerInfoAndReady(t *testing.T) {
	s := start(t, shift(nil))
	ready, err := stv1.NewSourceTransformClient(s.Conn).IsReady(sdktest.Context(t), &emptypb.Empty{})
	if err != nil || !ready.GetReady() {
		t.Fatalf("IsReady = %v, %v", ready, err)
	}
	sdktest.AssertInfoFile(t, s.InfoPath(), serverinfo.KindSourceTransformer)
	if err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
	sdktest.AssertRemoved(t, s.SocketPath(), s.InfoPath())
}

func TestMessage(t *testing.T) {
	m := sourcetransformer.NewMessage([]byte("v"), base).WithKeys([]string{"k"}).WithTags([]string{"t"}).WithEventTime(base.Add(time.Hour))
	if string(m.Value()) != "v" || !m.EventTime().Equal(base.Add(time.Hour)) || fmt.Sprint(m.Keys(), m.Tags()) != "[k] [t]" || m.IsDrop() {
		t.Errorf("message %+v", m)
	}
	if d := sourcetransformer.MessageToDrop(base); !d.IsDrop() || !d.EventTime().Equal(base) {
		t.Errorf("drop message %+v", d)
	}
}
