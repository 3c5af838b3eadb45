package main

import (
	"fmt"
	"io"
	"testing"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves as a batch map UDF that answers every request of a batch with
// its own keys and value, then ends the batch, and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindBatchMap)
	stream, err := mapv1.NewMapClient(p.Conn).MapFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&mapv1.MapRequest{Handshake: &mapv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("handshake: %v, %v", resp, err)
	}
	want := map[string]string{}
	for i, v := range []string{"x", "", "hello\nworld"} {
		id := fmt.Sprint("m", i)
		keys := []string{fmt.Sprint("k", i)}
		if err := stream.Send(&mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Keys: keys, Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
		want[id] = fmt.Sprintf("%v %q", keys, v)
	}
	if err := stream.Send(&mapv1.MapRequest{Status: &mapv1.TransmissionStatus{Eot: true}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetResults()) != 1 {
			t.Fatalf("%s: %d results, want 1", resp.GetId(), len(resp.GetResults()))
		}
		r := resp.GetResults()[0]
		got[resp.GetId()] = fmt.Sprintf("%v %q", r.GetKeys(), r.GetValue())
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetStatus().GetEot() {
		t.Fatalf("after the batch: %v, %v; want the end of the batch", resp, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", got, want)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
}
