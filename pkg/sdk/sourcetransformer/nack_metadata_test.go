package sourcetransformer_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	stv1 "github.com/sluiceflow/sluice/pkg/apis/proto/sourcetransformer/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
)

func TestMessageNack(t *testing.T) {
	reason := "later"
	opts := &sourcetransformer.NackOptions{Reason: &reason}
	m := sourcetransformer.MessageToNack(base, opts)
	if !m.IsNack() || m.IsDrop() || m.NackOptions() != opts || !m.EventTime().Equal(base) || m.Value() != nil ||
		len(m.Tags()) != 1 || m.Tags()[0] != `U+005C__NACK__` || sourcetransformer.NackTag != `U+005C__NACK__` {
		t.Errorf("nack message: tags %v options %v event time %v", m.Tags(), m.NackOptions(), m.EventTime())
	}
	if plain := sourcetransformer.NewMessage(nil, base); plain.IsNack() || plain.NackOptions() != nil || plain.UserMetadata() != nil {
		t.Error("a new message is no nack and has no user metadata")
	}
}

// A transformer sees the request's user metadata and answers with user
// metadata and nacks, on the wire as numaflow-go's transformer does.
func TestNackAndUserMetadata(t *testing.T) {
	delay := uint64(5000)
	s := start(t, sourcetransformer.SourceTransformerFunc(func(_ context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
		if string(d.Value()) == "nack" {
			return sourcetransformer.Messages{sourcetransformer.MessageToNack(d.EventTime(), &sourcetransformer.NackOptions{Delay: &delay})}
		}
		md := d.UserMetadata()
		md.AddKV("src", "seen", []byte("yes"))
		return sourcetransformer.Messages{
			sourcetransformer.NewMessage(d.Value(), d.EventTime()).WithKeys(keys).WithUserMetadata(md),
			sourcetransformer.NewMessage([]byte("bare"), d.EventTime()),
		}
	}))
	stream := open(t, s)
	for _, v := range []string{"pass", "nack"} {
		req := request(v, v, base)
		req.Request.Metadata = &common.Metadata{
			SysMetadata:  map[string]*common.KeyValueGroup{"sys": {KeyValue: map[string][]byte{"s": nil}}},
			UserMetadata: map[string]*common.KeyValueGroup{"g": {KeyValue: map[string][]byte{"a": []byte("x")}}},
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	et := timestamppb.New(base)
	want := map[string]*stv1.SourceTransformResponse{
		"pass": {Id: "pass", Results: []*stv1.SourceTransformResponse_Result{
			{Keys: []string{"k"}, Value: []byte("pass"), EventTime: et, Metadata: &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{
				"g":   {KeyValue: map[string][]byte{"a": []byte("x")}},
				"src": {KeyValue: map[string][]byte{"seen": []byte("yes")}},
			}}},
			{Value: []byte("bare"), EventTime: et, Metadata: &common.Metadata{}},
		}},
		"nack": {Id: "nack", Results: []*stv1.SourceTransformResponse_Result{{
			EventTime: et, Tags: []string{sourcetransformer.NackTag}, Metadata: &common.Metadata{},
			NackOptions: &common.NackOptions{Delay: proto.Uint64(5000)},
		}}},
	}
	for range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if w := want[resp.GetId()]; !proto.Equal(resp, w) {
			t.Errorf("response\n%v\nwant\n%v", resp, w)
		}
		for i, r := range resp.GetResults() {
			if r.Metadata == nil {
				t.Errorf("%s result %d: no metadata", resp.GetId(), i)
			}
		}
	}
}
