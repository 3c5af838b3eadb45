package mapstreamer_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
)

// A streaming map function sees the datum's user metadata and streams a
// message that carries user metadata, then a nack.
func TestNackAndUserMetadata(t *testing.T) {
	delay := uint64(20)
	s := start(t, mapstreamer.MapStreamerFunc(func(_ context.Context, _ []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
		md := d.UserMetadata()
		md.RemoveGroup("drop-me")
		out <- mapstreamer.NewMessage(d.Value()).WithUserMetadata(md)
		// Changing md after the message went out does not change it.
		md.AddKV("late", "k", nil)
		out <- mapstreamer.MessageToNack(&mapstreamer.NackOptions{Delay: &delay})
	}))
	stream := open(t, s)
	err := stream.Send(&mapv1.MapRequest{Id: "1", Request: &mapv1.MapRequest_Request{Value: []byte("v"), Metadata: &common.Metadata{
		UserMetadata: map[string]*common.KeyValueGroup{
			"keep":    {KeyValue: map[string][]byte{"a": []byte("x")}},
			"drop-me": {KeyValue: map[string][]byte{"b": []byte("y")}},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*mapv1.MapResponse{
		{Id: "1", Results: []*mapv1.MapResponse_Result{{Value: []byte("v"), Metadata: &common.Metadata{
			UserMetadata: map[string]*common.KeyValueGroup{"keep": {KeyValue: map[string][]byte{"a": []byte("x")}}},
		}}}},
		{Id: "1", Results: []*mapv1.MapResponse_Result{{
			Tags: []string{mapstreamer.NackTag}, Metadata: &common.Metadata{}, NackOptions: &common.NackOptions{Delay: proto.Uint64(20)},
		}}},
		{Id: "1", Status: &mapv1.TransmissionStatus{Eot: true}},
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
}
