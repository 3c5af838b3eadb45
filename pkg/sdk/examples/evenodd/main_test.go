package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

type datum []byte

func (d datum) ID() string                         { return "id" }
func (d datum) Keys() []string                     { return []string{"in"} }
func (d datum) Value() []byte                      { return d }
func (d datum) EventTime() time.Time               { return time.Time{} }
func (d datum) Watermark() time.Time               { return time.Time{} }
func (d datum) Headers() map[string]string         { return nil }
func (d datum) UserMetadata() *mapper.UserMetadata { return mapper.NewUserMetadata() }

func TestEvenOdd(t *testing.T) {
	cases := []struct {
		payload string
		want    string // "even", "odd" or "drop"
	}{
		{"42", "even"},
		{"7", "odd"},
		{" -3\n", "odd"},
		{"+10", "even"},
		{"0", "even"},
		{"123456789012345678901234567890", "even"},
		{`{"value": 8}`, "even"},
		{`{"value": "11"}`, "odd"},
		{`{"Data":{"value":7,"padding":"cGFk"},"Createdts":1700000000000000000}`, "odd"},
		{`{"Data":{"value":18446744073709551614}}`, "even"},
		{`{"value": 1.5}`, "drop"},
		{`{"value": -2}`, "even"},
		{`{"other": 2}`, "drop"},
		{`{"Data":{}}`, "drop"},
		{"abc", "drop"},
		{"", "drop"},
		{"+-1", "drop"},
		{"1e3", "drop"},
		{"[2]", "drop"},
	}
	for _, c := range cases {
		t.Run(c.payload, func(t *testing.T) {
			msgs := evenOdd(context.Background(), []string{"in"}, datum(c.payload))
			if len(msgs) != 1 {
				t.Fatalf("%d messages", len(msgs))
			}
			m := msgs[0]
			got := "drop"
			if !m.IsDrop() {
				got = m.Keys()[0]
				if fmt.Sprint(m.Keys(), m.Tags()) != fmt.Sprintf("[%s] [%s-tag]", got, got) || string(m.Value()) != c.payload {
					t.Errorf("message: keys %v tags %v value %q", m.Keys(), m.Tags(), m.Value())
				}
			}
			if got != c.want {
				t.Errorf("%q: %s, want %s", c.payload, got, c.want)
			}
		})
	}
}

// The built binary serves as a unary map UDF and stops on SIGTERM.
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
	payloads := map[string]string{"a": "4", "b": "x", "c": `{"Data":{"value":7}}`}
	for id, v := range payloads {
		if err := stream.Send(&mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for range payloads {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetResults()[0]
		got[resp.GetId()] = fmt.Sprint(r.GetKeys(), r.GetTags())
	}
	want := map[string]string{"a": "[even] [even-tag]", "b": "[] [" + mapper.DropTag + "]", "c": "[odd] [odd-tag]"}
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
	sdktest.AssertRemoved(t, p.Dir+"/"+serverinfo.MapSocket, p.Dir+"/"+serverinfo.MapInfoFile)
}
