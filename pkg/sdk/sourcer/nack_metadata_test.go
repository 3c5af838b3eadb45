package sourcer_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
)

// optionsSource is a listSource that wants its nacks' options and gives
// its messages user metadata.
type optionsSource struct {
	*listSource
	nackReqs chan []sourcer.NackRequest
}

var _ sourcer.OptionsNacker = optionsSource{}

func (s optionsSource) NackWithOptions(_ context.Context, reqs []sourcer.NackRequest) {
	s.nackReqs <- reqs
}

func (s optionsSource) Nack(context.Context, []sourcer.Offset) {
	panic("Nack called on an OptionsNacker")
}

// Read hands out the listSource's messages, the first with user metadata.
func (s optionsSource) Read(ctx context.Context, req sourcer.ReadRequest, out chan<- sourcer.Message) {
	md := sourcer.NewUserMetadata()
	md.AddKV("origin", "partition", []byte("7"))
	msgs := make(chan sourcer.Message, req.Count)
	s.listSource.Read(ctx, req, msgs)
	close(msgs)
	first := true
	for m := range msgs {
		if first {
			m = m.WithUserMetadata(md) // a copy: the change below does not show
			md.AddKV("origin", "late", nil)
			first = false
		}
		out <- m
	}
}

// An OptionsNacker gets each group of a nack with its options, in order.
func TestNackWithOptions(t *testing.T) {
	src := optionsSource{listSource: newListSource(), nackReqs: make(chan []sourcer.NackRequest, 1)}
	s := start(t, src)
	_, err := sourcev1.NewSourceClient(s.Conn).NackFn(sdktest.Context(t), &sourcev1.NackRequest{Request: []*sourcev1.NackRequest_Request{
		{Offsets: []*sourcev1.Offset{{Offset: []byte("a")}, {Offset: []byte("b"), PartitionId: 2}}, NackOptions: &common.NackOptions{
			Delay: proto.Uint64(1500), MaxDeliveries: proto.Uint32(4), Reason: proto.String("poison"), NackMap: map[string]string{"k": "v"},
		}},
		{Offsets: []*sourcev1.Offset{{Offset: []byte("c")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := <-src.nackReqs
	if len(reqs) != 2 {
		t.Fatalf("NackWithOptions got %d requests, want 2", len(reqs))
	}
	o := reqs[0].Options
	if render(reqs[0].Offsets) != "[a/0 b/2]" || o == nil || *o.Delay != 1500 || *o.MaxDeliveries != 4 || *o.Reason != "poison" ||
		fmt.Sprint(o.NackMap) != "map[k:v]" || o.DelayDuration().Milliseconds() != 1500 {
		t.Errorf("first request: %s %+v", render(reqs[0].Offsets), o)
	}
	if render(reqs[1].Offsets) != "[c/0]" || reqs[1].Options != nil {
		t.Errorf("second request: %s %+v", render(reqs[1].Offsets), reqs[1].Options)
	}
}

// A read message's user metadata goes out as its metadata; a message
// without any goes out with an empty metadata, as numaflow-go's do.
func TestReadUserMetadata(t *testing.T) {
	src := optionsSource{listSource: newListSource(), nackReqs: make(chan []sourcer.NackRequest, 1)}
	s := start(t, src)
	stream := openRead(t, s)
	if err := stream.Send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: 2, TimeoutInMs: 250}}); err != nil {
		t.Fatal(err)
	}
	want := []*common.Metadata{
		{UserMetadata: map[string]*common.KeyValueGroup{"origin": {KeyValue: map[string][]byte{"partition": []byte("7")}}}},
		{},
	}
	for i, w := range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if md := resp.GetResult().Metadata; md == nil || !proto.Equal(md, w) {
			t.Errorf("message %d metadata %v, want %v", i, md, w)
		}
	}
	if resp, err := stream.Recv(); err != nil || !resp.GetStatus().GetEot() {
		t.Fatalf("eot = %v, %v", resp, err)
	}
}

func TestMessageWithUserMetadata(t *testing.T) {
	md := sourcer.NewUserMetadata()
	md.AddKV("g", "k", []byte("v"))
	m := sourcer.Message{Value: []byte("x")}.WithUserMetadata(md)
	md.RemoveGroup("g")
	if m.UserMetadata.String() != `g{k="v"}` || string(m.Value) != "x" {
		t.Errorf("message %+v, metadata %s", m, m.UserMetadata)
	}
	if m.WithUserMetadata(nil).UserMetadata != nil {
		t.Error("WithUserMetadata(nil) must clear it")
	}
}
