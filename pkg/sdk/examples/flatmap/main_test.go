package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

type datum []byte

func (d datum) ID() string                         { return "id" }
func (d datum) Keys() []string                     { return nil }
func (d datum) Value() []byte                      { return d }
func (d datum) EventTime() time.Time               { return time.Time{} }
func (d datum) Watermark() time.Time               { return time.Time{} }
func (d datum) Headers() map[string]string         { return nil }
func (d datum) UserMetadata() *mapper.UserMetadata { return mapper.NewUserMetadata() }

func TestFlatMap(t *testing.T) {
	cases := []struct {
		payload string
		want    string
	}{
		{"a,b,c", `["a" "b" "c"]`},
		{"single", `["single"]`},
		{"x,,y,", `["x" "" "y" ""]`},
		{"", `[""]`},
	}
	for _, c := range cases {
		t.Run(c.payload, func(t *testing.T) {
			var got []string
			for _, m := range flatMap(context.Background(), []string{"k1", "k2"}, datum(c.payload)) {
				got = append(got, string(m.Value()))
				if fmt.Sprint(m.Keys()) != "[k1 k2]" || len(m.Tags()) != 0 {
					t.Errorf("keys %v tags %v", m.Keys(), m.Tags())
				}
			}
			if g := fmt.Sprintf("%q", got); g != c.want {
				t.Errorf("%q -> %s, want %s", c.payload, g, c.want)
			}
		})
	}
}

func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindMap)
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
	req := &mapv1.MapRequest{Id: "1", Request: &mapv1.MapRequest_Request{Keys: []string{"k"}, Value: []byte("x,y")}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resp.GetResults() {
		got = append(got, fmt.Sprintf("%v %s", r.GetKeys(), r.GetValue()))
	}
	if resp.GetId() != "1" || fmt.Sprint(got) != "[[k] x [k] y]" {
		t.Errorf("response %s %v", resp.GetId(), got)
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
	sdktest.AssertRemoved(t, filepath.Join(p.Dir, serverinfo.MapSocket), filepath.Join(p.Dir, serverinfo.MapInfoFile))
}
