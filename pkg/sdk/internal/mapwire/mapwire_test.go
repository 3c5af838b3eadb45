package mapwire

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/wiretest"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// requests are requests of every shape a runtime may send.
func requests() []*mapv1.MapRequest {
	at := timestamppb.New(time.Date(2024, 2, 29, 23, 59, 59, 123_456_789, time.UTC))
	md := &common.Metadata{PreviousVertex: "p", UserMetadata: map[string]*common.KeyValueGroup{
		"g": {KeyValue: map[string][]byte{"k": []byte("v")}}}}
	return []*mapv1.MapRequest{
		{Handshake: &mapv1.Handshake{Sot: true}},
		{Status: &mapv1.TransmissionStatus{Eot: true}},
		{Id: "1-0", Request: &mapv1.MapRequest_Request{}},
		{Id: "1-1", Request: &mapv1.MapRequest_Request{Keys: []string{"a", "", "ü"}, Value: []byte("v"), EventTime: at,
			Watermark: timestamppb.New(time.UnixMilli(-1))}},
		{Id: "1-2", Request: &mapv1.MapRequest_Request{Value: make([]byte, 3000), EventTime: &timestamppb.Timestamp{},
			Headers: map[string]string{"h": "x", "": "", "k": ""}, Metadata: md}},
		{Id: "1-3", Request: &mapv1.MapRequest_Request{Metadata: &common.Metadata{}}},
	}
}

// assertDatum checks that r holds what the generated message want holds.
func assertDatum(t *testing.T, r *Request, want *mapv1.MapRequest) {
	t.Helper()
	w := want.GetRequest()
	if r.ID() != want.GetId() || r.HasMessage() != (w != nil) || IsHandshake(r) != want.GetHandshake().GetSot() ||
		IsEOT(r) != want.GetStatus().GetEot() {
		t.Fatalf("id %q, message %t, handshake %t, eot %t; want %v", r.ID(), r.HasMessage(), IsHandshake(r), IsEOT(r), want)
	}
	if !slices.Equal(r.Keys(), w.GetKeys()) || (r.Keys() == nil) != (w.GetKeys() == nil) ||
		string(r.Value()) != string(w.GetValue()) || (r.Value() == nil) != (w.GetValue() == nil) {
		t.Errorf("keys %q, value %q; want %q, %q", r.Keys(), r.Value(), w.GetKeys(), w.GetValue())
	}
	wantTime := func(ts *timestamppb.Timestamp) time.Time {
		if ts == nil {
			return time.Time{}
		}
		return ts.AsTime()
	}
	if !r.EventTime().Equal(wantTime(w.GetEventTime())) || r.EventTime().IsZero() != (w.GetEventTime() == nil) ||
		!r.Watermark().Equal(wantTime(w.GetWatermark())) || r.Watermark().IsZero() != (w.GetWatermark() == nil) {
		t.Errorf("event time %v, watermark %v; want %v, %v", r.EventTime(), r.Watermark(), w.GetEventTime(), w.GetWatermark())
	}
	// (The generated code makes an empty map for a headers field of the
	// wrong wire type, which it then skips; no map and an empty one are the
	// same to a map function.)
	if !maps.Equal(r.Headers(), w.GetHeaders()) {
		t.Errorf("headers %v, want %v", r.Headers(), w.GetHeaders())
	}
	if !proto.Equal(r.metadata, w.GetMetadata()) {
		t.Errorf("metadata %v, want %v", r.metadata, w.GetMetadata())
	}
	if got, want := r.UserMetadata().String(), metadata.FromProto(w.GetMetadata()).String(); got != want {
		t.Errorf("user metadata %s, want %s", got, want)
	}
}

func TestRequestDecoding(t *testing.T) {
	for i, want := range requests() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			var r Request
			if err := r.UnmarshalWire(b); err != nil {
				t.Fatal(err)
			}
			assertDatum(t, &r, want)
			// What is decoded does not share the buffer.
			clear(b)
			assertDatum(t, &r, want)
		})
	}
}

// Whatever bytes come, the hand-written decoder fails when the generated
// code fails, and otherwise decodes what it decodes: valid requests cut,
// changed and extended at random.
func TestRequestDecodingMatchesGenerated(t *testing.T) {
	var seeds [][]byte
	for _, r := range requests() {
		b, _ := proto.Marshal(r)
		seeds = append(seeds, b)
	}
	for i, b := range wiretest.Mutations(seeds, 3, 4, 50_000) {
		want := new(mapv1.MapRequest)
		wantErr := proto.Unmarshal(b, want)
		var got Request
		gotErr := got.UnmarshalWire(b)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("case %d, %x: error %v, the generated code's %v", i, b, gotErr, wantErr)
		}
		if wantErr == nil {
			assertDatum(t, &got, want)
			if t.Failed() {
				t.Fatalf("case %d, %x", i, b)
			}
		}
	}
}

// message is a Message for the tests.
type message struct {
	keys, tags []string
	value      []byte
	md         *metadata.UserMetadata
	nack       *nack.Options
}

func (m message) Keys() []string                       { return m.keys }
func (m message) Value() []byte                        { return m.value }
func (m message) Tags() []string                       { return m.tags }
func (m message) UserMetadata() *metadata.UserMetadata { return m.md }
func (m message) NackOptions() *nack.Options           { return m.nack }

// generated is what the generated code would send for id and msgs: every
// result carries a metadata, empty when the message has none.
func generated(id string, msgs []message) *mapv1.MapResponse {
	out := &mapv1.MapResponse{Id: id}
	for _, m := range msgs {
		out.Results = append(out.Results, &mapv1.MapResponse_Result{Keys: m.keys, Value: m.value, Tags: m.tags,
			Metadata: metadata.ToProto(m.md), NackOptions: nack.ToProto(m.nack)})
	}
	return out
}

func TestResponseEncoding(t *testing.T) {
	md := metadata.FromProto(&common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{
		"g": {KeyValue: map[string][]byte{"k": []byte("v"), "e": nil}}, "h": {}}})
	delay, reason := uint64(250), "busy"
	cases := []struct {
		name string
		id   string
		msgs []message
	}{
		{"none", "1-0", nil},
		{"empty message", "1-1", []message{{}}},
		{"one", "1-2", []message{{keys: []string{"k", ""}, value: []byte("v")}}},
		{"many", "1-3", []message{
			{value: []byte("a"), tags: []string{"t1", "t2"}, md: md},
			{tags: []string{"U+005C__DROP__"}},
			{tags: []string{nack.Tag}, nack: &nack.Options{Delay: &delay, Reason: &reason, NackMap: map[string]string{"a": "b"}}},
			{value: make([]byte, 5000)},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertEncodes(t, NewResponse(c.id, c.msgs), generated(c.id, c.msgs))
		})
	}
	t.Run("handshake", func(t *testing.T) {
		assertEncodes(t, HandshakeEcho(), &mapv1.MapResponse{Handshake: &mapv1.Handshake{Sot: true}})
	})
	t.Run("end of batch", func(t *testing.T) {
		assertEncodes(t, EOT(""), &mapv1.MapResponse{Status: &mapv1.TransmissionStatus{Eot: true}})
	})
	t.Run("end of a request", func(t *testing.T) {
		assertEncodes(t, EOT("1-9"), &mapv1.MapResponse{Id: "1-9", Status: &mapv1.TransmissionStatus{Eot: true}})
	})
}

// assertEncodes checks that r, decoded by the generated code, is want, and
// has the size of want's encoding.
func assertEncodes(t *testing.T, r *Response, want *mapv1.MapResponse) {
	t.Helper()
	b, err := r.MarshalAppend(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != r.MarshalSize() {
		t.Fatalf("encoding of %d bytes, MarshalSize %d", len(b), r.MarshalSize())
	}
	if std, _ := proto.Marshal(want); len(std) != len(b) {
		t.Errorf("encoding of %d bytes, the generated code's %d", len(b), len(std))
	}
	got := new(mapv1.MapResponse)
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("decoded as %v, want %v", got, want)
	}
}

// A Response set again and again sends each time what it was last set to.
func TestSetResponseReuses(t *testing.T) {
	var r Response
	for i, msgs := range [][]message{
		{{value: []byte("a")}, {value: []byte("b")}, {value: []byte("c")}},
		{{value: []byte("d")}},
		nil,
		{{value: []byte("e")}, {value: []byte("f")}},
		{{value: []byte("g")}, {value: []byte("h")}, {value: []byte("i")}},
	} {
		id := fmt.Sprint("2-", i)
		SetResponse(&r, id, msgs)
		assertEncodes(t, &r, generated(id, msgs))
	}
}

// Answers from the pool, handed back once sent, are set anew when taken
// again, and an answer not from the pool ignores Sent.
func TestGetResponseReuses(t *testing.T) {
	for i, msgs := range [][]message{
		{{value: []byte("a")}, {value: []byte("b")}},
		{{value: []byte("c")}},
		nil,
		{{value: []byte("d")}, {value: []byte("e")}, {value: []byte("f")}},
	} {
		id := fmt.Sprint("3-", i)
		r := GetResponse(id, msgs)
		assertEncodes(t, r, generated(id, msgs))
		r.Sent()
	}
	r := NewResponse("4-0", []message{{value: []byte("g")}})
	r.Sent()
	assertEncodes(t, r, generated("4-0", []message{{value: []byte("g")}}))
}

// Like the generated code, the encoding fails on keys or tags that are not
// UTF-8.
func TestResponseInvalidUTF8(t *testing.T) {
	for _, m := range []message{{keys: []string{"\xff"}}, {tags: []string{"ok", "\xfe"}}} {
		if _, err := NewResponse("1-0", []message{m}).MarshalAppend(nil); err == nil {
			t.Errorf("%+v encoded", m)
		}
		if _, err := proto.Marshal(generated("1-0", []message{m})); err == nil {
			t.Errorf("the generated code encoded %+v", m)
		}
	}
}

// BenchmarkRequestDecoding decodes each of the test requests once per
// iteration.
func BenchmarkRequestDecoding(b *testing.B) {
	var wire [][]byte
	for _, r := range requests() {
		w, err := proto.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, w)
	}
	var r Request
	for b.Loop() {
		for _, w := range wire {
			if err := r.UnmarshalWire(w); err != nil {
				b.Fatal(err)
			}
		}
	}
}
