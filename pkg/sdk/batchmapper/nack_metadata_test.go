package batchmapper_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
)

// A batch map function sees each datum's user metadata and answers with
// nacks and with messages that carry user metadata.
func TestNackAndUserMetadata(t *testing.T) {
	maxDeliveries := uint32(2)
	s := start(t, batchmapper.BatchMapperFunc(func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
		var out batchmapper.BatchResponses
		for d := range datums {
			if string(d.Value()) == "nack" {
				out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.MessageToNack(&batchmapper.NackOptions{MaxDeliveries: &maxDeliveries})))
				continue
			}
			md := d.UserMetadata()
			md.AddKV("seen", "by", []byte("batch"))
			out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.NewMessage(d.Value()).WithUserMetadata(md)))
		}
		return out
	}))
	stream := open(t, s)
	for i, v := range []string{"pass", "nack"} {
		req := &mapv1.MapRequest{Id: v, Request: &mapv1.MapRequest_Request{Value: []byte(v)}}
		if i == 0 {
			req.Request.Metadata = &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{"g": {KeyValue: map[string][]byte{"a": []byte("x")}}}}
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&mapv1.MapRequest{Status: &mapv1.TransmissionStatus{Eot: true}}); err != nil {
		t.Fatal(err)
	}
	want := []*mapv1.MapResponse{
		{Id: "pass", Results: []*mapv1.MapResponse_Result{{Value: []byte("pass"), Metadata: &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{
			"g":    {KeyValue: map[string][]byte{"a": []byte("x")}},
			"seen": {KeyValue: map[string][]byte{"by": []byte("batch")}},
		}}}}},
		{Id: "nack", Results: []*mapv1.MapResponse_Result{{
			Tags: []string{batchmapper.NackTag}, Metadata: &common.Metadata{},
			NackOptions: &common.NackOptions{MaxDeliveries: proto.Uint32(2)},
		}}},
		{Status: &mapv1.TransmissionStatus{Eot: true}},
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
