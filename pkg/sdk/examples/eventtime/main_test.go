package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
)

var sourceTime = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

type datum []byte

func (d datum) ID() string                 { return "id" }
func (d datum) Keys() []string             { return []string{"k"} }
func (d datum) Value() []byte              { return d }
func (d datum) EventTime() time.Time       { return sourceTime }
func (d datum) Watermark() time.Time       { return time.Time{} }
func (d datum) Headers() map[string]string { return nil }
func (d datum) UserMetadata() *sourcetransformer.UserMetadata {
	return sourcetransformer.NewUserMetadata()
}

func TestEventTime(t *testing.T) {
	cases := []struct {
		payload string
		want    time.Time // zero: dropped
	}{
		{`{"ts": 1700000000123}`, time.UnixMilli(1700000000123)},
		{`{"ts": 0, "v": 1}`, time.UnixMilli(0)},
		{`{"v": 1}`, sourceTime},
		{`{"ts": "soon"}`, sourceTime},
		{`{"ts": 1.5}`, sourceTime},
		{`not json`, sourceTime},
		{`{"ts": 1700000000123, "action": "drop"}`, time.Time{}},
		{`drop me`, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.payload, func(t *testing.T) {
			msgs := eventTime(context.Background(), []string{"k"}, datum(c.payload))
			if len(msgs) != 1 {
				t.Fatalf("%d messages", len(msgs))
			}
			m := msgs[0]
			if c.want.IsZero() {
				if !m.IsDrop() || !m.EventTime().Equal(sourceTime) {
					t.Errorf("want a drop with the source's event time, got %+v", m)
				}
				return
			}
			if m.IsDrop() || !m.EventTime().Equal(c.want) || string(m.Value()) != c.payload || fmt.Sprint(m.Keys()) != "[k]" {
				t.Errorf("message %q at %v keys %v, want event time %v", m.Value(), m.EventTime(), m.Keys(), c.want)
			}
		})
	}
}

func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindSourceTransformer)
	stream, err := stv1.NewSourceTransformClient(p.Conn).SourceTransformFn(sdktest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&stv1.SourceTransformRequest{Handshake: &stv1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("handshake: %v, %v", resp, err)
	}
	req := &stv1.SourceTransformRequest{Request: &stv1.SourceTransformRequest_Request{
		Id: "1", Value: []byte(`{"ts": 1700000000000}`), EventTime: timestamppb.New(sourceTime),
	}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != "1" || !resp.GetResults()[0].GetEventTime().AsTime().Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("response %v", resp)
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
	sdktest.AssertRemoved(t, filepath.Join(p.Dir, serverinfo.SourceTransformerSocket), filepath.Join(p.Dir, serverinfo.SourceTransformerInfoFile))
}
