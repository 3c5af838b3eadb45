package mapper_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// inMetadata is the metadata of the requests of these tests: system
// metadata, which the map function does not see, and user metadata.
func inMetadata() *common.Metadata {
	return &common.Metadata{
		PreviousVertex: "in",
		SysMetadata:    map[string]*common.KeyValueGroup{"sys": {KeyValue: map[string][]byte{"s": []byte("1")}}},
		UserMetadata: map[string]*common.KeyValueGroup{
			"g": {KeyValue: map[string][]byte{"a": []byte("x")}},
		},
	}
}

// A map function reads the input's user metadata and answers with messages
// that carry user metadata and nack options; an answer without user
// metadata carries an empty metadata, as numaflow-go's does.
func TestNackAndUserMetadata(t *testing.T) {
	delay, reason := uint64(1500), "not yet"
	opts := &mapper.NackOptions{Delay: &delay, Reason: &reason, NackMap: map[string]string{"k": "v"}}
	seen := make(chan string, 3)
	s := start(t, mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		md := d.UserMetadata()
		seen <- md.String() // before any change: the request's user metadata only
		switch string(d.Value()) {
		case "nack":
			return mapper.Messages{mapper.MessageToNack(opts)}
		case "nack-plain":
			return mapper.Messages{mapper.MessageToNack(nil)}
		}
		md.AddKV("g", "b", []byte("y"))
		md.AddKV("new", "c", []byte("z"))
		return mapper.Messages{
			mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(md),
			mapper.NewMessage([]byte("bare")),
		}
	}))
	stream := open(t, s)
	for _, v := range []string{"pass", "nack", "nack-plain"} {
		req := request(v, v, "k")
		req.Request.Metadata = inMetadata()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]*mapv1.MapResponse_Result{
		"pass": {
			{Keys: []string{"k"}, Value: []byte("pass"), Metadata: &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{
				"g":   {KeyValue: map[string][]byte{"a": []byte("x"), "b": []byte("y")}},
				"new": {KeyValue: map[string][]byte{"c": []byte("z")}},
			}}},
			{Value: []byte("bare"), Metadata: &common.Metadata{}},
		},
		"nack": {{
			Tags:     []string{`U+005C__NACK__`},
			Metadata: &common.Metadata{},
			NackOptions: &common.NackOptions{
				Delay: proto.Uint64(1500), Reason: proto.String("not yet"), NackMap: map[string]string{"k": "v"},
			},
		}},
		"nack-plain": {{Tags: []string{`U+005C__NACK__`}, Metadata: &common.Metadata{}}},
	}
	for range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		w := &mapv1.MapResponse{Id: resp.GetId(), Results: want[resp.GetId()]}
		if !proto.Equal(resp, w) {
			t.Errorf("response\n%v\nwant\n%v", resp, w)
		}
		// An empty metadata is sent, not left out: numaflow-go's encoding.
		for i, r := range resp.GetResults() {
			if r.Metadata == nil {
				t.Errorf("%s result %d: no metadata", resp.GetId(), i)
			}
		}
	}
	for range want {
		if got := <-seen; got != `g{a="x"}` {
			t.Errorf("datum user metadata: %s", got)
		}
	}
}
