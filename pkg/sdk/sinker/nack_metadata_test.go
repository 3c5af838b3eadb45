package sinker_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	sinkv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sink/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
)

func TestResponseNack(t *testing.T) {
	delay := uint64(10)
	opts := &sinker.NackOptions{Delay: &delay}
	r := sinker.ResponseNack("id", opts)
	if r.ID() != "id" || !r.IsNack() || r.OK() || r.IsFallback() || r.Err() != "" || r.NackOptions() != opts {
		t.Errorf("nack response: ok %v fallback %v err %q options %v", r.OK(), r.IsFallback(), r.Err(), r.NackOptions())
	}
	if ok := sinker.ResponseOK("id"); ok.IsNack() || ok.NackOptions() != nil {
		t.Error("an ok response is no nack")
	}
}

// A sink sees each message's user metadata and nacks some messages, with
// or without options: status NACK and nack_options on the wire, next to
// the other statuses.
func TestNackAndUserMetadata(t *testing.T) {
	delay, reason := uint64(250), "busy"
	seen := make(chan string, 3)
	s := start(t, serverinfo.KindSink, sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			seen <- d.ID() + " " + d.UserMetadata().String()
			switch string(d.Value()) {
			case "nack":
				out = append(out, sinker.ResponseNack(d.ID(), &sinker.NackOptions{Delay: &delay, Reason: &reason, NackMap: map[string]string{"k": "v"}}))
			case "nack-plain":
				out = append(out, sinker.ResponseNack(d.ID(), nil))
			default:
				out = append(out, sinker.ResponseOK(d.ID()))
			}
		}
		return out
	}))
	stream := open(t, s)
	for i, v := range []string{"ok", "nack", "nack-plain"} {
		req := &sinkv1.SinkRequest{Request: &sinkv1.SinkRequest_Request{Id: v, Value: []byte(v)}, Status: &sinkv1.TransmissionStatus{}}
		if i == 0 {
			req.Request.Metadata = &common.Metadata{
				SysMetadata:  map[string]*common.KeyValueGroup{"sys": {KeyValue: map[string][]byte{"s": []byte("1")}}},
				UserMetadata: map[string]*common.KeyValueGroup{"kafka": {KeyValue: map[string][]byte{"topic": []byte("t")}}},
			}
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&sinkv1.SinkRequest{Status: &sinkv1.TransmissionStatus{Eot: true}}); err != nil {
		t.Fatal(err)
	}
	want := []*sinkv1.SinkResponse{
		{Results: []*sinkv1.SinkResponse_Result{
			{Id: "ok", Status: sinkv1.Status_SUCCESS},
			{Id: "nack", Status: sinkv1.Status_NACK, NackOptions: &common.NackOptions{
				Delay: proto.Uint64(250), Reason: proto.String("busy"), NackMap: map[string]string{"k": "v"},
			}},
			{Id: "nack-plain", Status: sinkv1.Status_NACK},
		}},
		{Status: &sinkv1.TransmissionStatus{Eot: true}},
	}
	for _, w := range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(resp, w) {
			t.Errorf("response\n%v\nwant\n%v", resp, w)
		}
	}
	for _, w := range []string{`ok kafka{topic="t"}`, "nack ", "nack-plain "} {
		if got := <-seen; got != w {
			t.Errorf("datum %q, want %q", got, w)
		}
	}
}
