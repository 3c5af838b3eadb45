package main

import (
	"fmt"
	"io"
	"testing"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves as a stream map UDF that answers every request
// with its own keys and value, then ends the request's stream, and stops on
// SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindMapStream)
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
	for i, v := range []string{"x", "", "hello\nworld"} {
		id, keys := fmt.Sprint("m", i), []string{fmt.Sprint("k", i)}
		if err := stream.Send(&mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Keys: keys, Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil || resp.GetId() != id || len(resp.GetResults()) != 1 {
			t.Fatalf("%s: %v, %v; want one result", id, resp, err)
		}
		if r := resp.GetResults()[0]; fmt.Sprint(r.GetKeys()) != fmt.Sprint(keys) || string(r.GetValue()) != v {
			t.Fatalf("%s: keys %v value %q; want %v %q", id, r.GetKeys(), r.GetValue(), keys, v)
		}
		if resp, err := stream.Recv(); err != nil || resp.GetId() != id || !resp.GetStatus().GetEot() {
			t.Fatalf("%s: %v, %v; want the end of its stream", id, resp, err)
		}
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
