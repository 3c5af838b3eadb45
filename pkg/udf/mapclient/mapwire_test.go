package mapclient

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/wiretest"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// requestMessages are messages of every shape the runtime sends.
func requestMessages() []isb.Message {
	at := time.Date(2024, 2, 29, 23, 59, 59, 123_456_789, time.UTC)
	return []isb.Message{
		{},
		{Value: []byte("v"), EventTime: at},
		{Keys: []string{"a", "", "ü"}, Value: []byte{0, 1, 2}, EventTime: time.UnixMilli(-1500)},
		{Keys: []string{}, EventTime: time.Unix(0, 0), Headers: map[string]string{"h": "x", "": "", "k": ""}},
		{Value: make([]byte, 3000), EventTime: at, Headers: map[string]string{"only": "one"},
			Metadata: isb.Metadata{"g": {"k": []byte("v"), "e": nil}, "empty": {}}},
	}
}

// The hand-written MapRequest is, once decoded by the generated code, the
// request the generated message would have carried.
func TestMapRequestEncoding(t *testing.T) {
	wm := timestamppb.New(time.UnixMilli(-1))
	for i, m := range requestMessages() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var r mapRequest
			r.setMessage(&m, "17-", 100+i, timestamp{m.EventTime.Unix(), int32(m.EventTime.Nanosecond())}, watermarkNone,
				isbproto.ToMetadata(m.Metadata))
			want := &mapv1.MapRequest{Id: fmt.Sprint("17-", 100+i), Request: &mapv1.MapRequest_Request{
				Keys: m.Keys, Value: m.Value, EventTime: timestamppb.New(m.EventTime), Watermark: wm, Headers: m.Headers,
				Metadata: isbproto.ToMetadata(m.Metadata)}}
			assertEncodes(t, &r, want)
		})
	}
	t.Run("handshake", func(t *testing.T) {
		assertEncodes(t, &mapRequest{handshake: true}, &mapv1.MapRequest{Handshake: &mapv1.Handshake{Sot: true}})
	})
	t.Run("end of batch", func(t *testing.T) {
		assertEncodes(t, &mapRequest{eot: true}, &mapv1.MapRequest{Status: &mapv1.TransmissionStatus{Eot: true}})
	})
}

func assertEncodes(t *testing.T, r *mapRequest, want *mapv1.MapRequest) {
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
	got := new(mapv1.MapRequest)
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("decoded as %v, want %v", got, want)
	}
}

// responses are answers of every shape a server may send.
func responses() []*mapv1.MapResponse {
	md := &common.Metadata{PreviousVertex: "p", UserMetadata: map[string]*common.KeyValueGroup{
		"g": {KeyValue: map[string][]byte{"k": []byte("v")}}}}
	reason, delay := "busy", uint64(250)
	return []*mapv1.MapResponse{
		{Handshake: &mapv1.Handshake{Sot: true}},
		{Status: &mapv1.TransmissionStatus{Eot: true}},
		{Id: "3-1", Status: &mapv1.TransmissionStatus{Eot: true}},
		{Id: "3-0"},
		{Id: "3-0", Results: []*mapv1.MapResponse_Result{{}}},
		{Id: "3-2", Results: []*mapv1.MapResponse_Result{{Keys: []string{"k", ""}, Value: []byte("v"), Metadata: &common.Metadata{}}}},
		{Id: "3-4", Results: []*mapv1.MapResponse_Result{
			{Value: []byte("a"), Tags: []string{"t1", "t2"}, Metadata: md},
			{Keys: []string{"x"}, Tags: []string{DropTag}},
			{Tags: []string{NackTag}, NackOptions: &common.NackOptions{Reason: &reason, Delay: &delay, NackMap: map[string]string{"a": "b"}}},
			{Value: make([]byte, 5000), Metadata: &common.Metadata{}},
		}},
	}
}

// asResponse is what r would be as the generated message, as far as the
// runtime looks at it.
func asResponse(r *mapResponse) *mapv1.MapResponse {
	out := &mapv1.MapResponse{Id: r.id}
	if r.handshake {
		out.Handshake = &mapv1.Handshake{Sot: true}
	}
	if r.eot {
		out.Status = &mapv1.TransmissionStatus{Eot: true}
	}
	for _, res := range r.results {
		out.Results = append(out.Results, &mapv1.MapResponse_Result{Keys: res.keys, Value: res.value, Tags: res.tags,
			Metadata: res.metadata, NackOptions: res.nack})
	}
	return out
}

// normal drops from m what the runtime does not look at: the presence of a
// handshake or status whose flag is false.
func normal(m *mapv1.MapResponse) *mapv1.MapResponse {
	m = proto.Clone(m).(*mapv1.MapResponse)
	if !m.GetHandshake().GetSot() {
		m.Handshake = nil
	}
	if !m.GetStatus().GetEot() {
		m.Status = nil
	}
	m.ProtoReflect().SetUnknown(nil)
	for _, res := range m.Results {
		res.ProtoReflect().SetUnknown(nil)
	}
	return m
}

func TestMapResponseDecoding(t *testing.T) {
	for i, want := range responses() {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			var got mapResponse
			if err := got.UnmarshalWire(b); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(asResponse(&got), normal(want)) {
				t.Errorf("decoded as %v, want %v", asResponse(&got), want)
			}
			// What is decoded does not share the buffer.
			clear(b)
			if !proto.Equal(asResponse(&got), normal(want)) {
				t.Errorf("after the buffer was cleared: %v, want %v", asResponse(&got), want)
			}
		})
	}
}

// Whatever bytes come, the hand-written decoder fails when the generated
// code fails, and otherwise decodes what it decodes: valid answers cut,
// changed and extended at random.
func TestMapResponseDecodingMatchesGenerated(t *testing.T) {
	var seeds [][]byte
	for _, r := range responses() {
		b, _ := proto.Marshal(r)
		seeds = append(seeds, b)
	}
	for i, b := range wiretest.Mutations(seeds, 1, 2, 50_000) {
		want := new(mapv1.MapResponse)
		wantErr := proto.Unmarshal(b, want)
		var got mapResponse
		gotErr := got.UnmarshalWire(b)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("case %d, %x: error %v, the generated code's %v", i, b, gotErr, wantErr)
		}
		if wantErr == nil && !proto.Equal(asResponse(&got), normal(want)) {
			t.Fatalf("case %d, %x: decoded as %v, want %v", i, b, asResponse(&got), want)
		}
	}
}

// Like the generated code, the encoding fails on keys or headers that are
// not UTF-8.
func TestMapRequestInvalidUTF8(t *testing.T) {
	for _, m := range []isb.Message{
		{Keys: []string{"ok", "\xff"}},
		{Headers: map[string]string{"\xff": "v"}},
		{Headers: map[string]string{"k": "\xfe"}},
	} {
		var r mapRequest
		r.setMessage(&m, "1-", 0, timestamp{}, watermarkNone, nil)
		if _, err := r.MarshalAppend(nil); err == nil {
			t.Errorf("%+v encoded", m)
		}
		std := &mapv1.MapRequest{Request: &mapv1.MapRequest_Request{Keys: m.Keys, Headers: m.Headers}}
		if _, err := proto.Marshal(std); err == nil {
			t.Errorf("the generated code encoded %v", std)
		}
	}
}

// BenchmarkMapResponseDecoding decodes each of the test responses once per
// iteration.
func BenchmarkMapResponseDecoding(b *testing.B) {
	var wire [][]byte
	for _, r := range responses() {
		w, err := proto.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, w)
	}
	var r mapResponse
	for b.Loop() {
		for _, w := range wire {
			if err := r.UnmarshalWire(w); err != nil {
				b.Fatal(err)
			}
		}
	}
}
