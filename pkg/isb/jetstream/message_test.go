package jetstream

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// sameMessage compares what the encoding carries: nil and empty are alike,
// times by instant, tags are dropped.
func sameMessage(a, b isb.Message) bool {
	return a.ID == b.ID && slices.Equal(a.Keys, b.Keys) && bytes.Equal(a.Value, b.Value) &&
		a.EventTime.Equal(b.EventTime) && a.EventTime.IsZero() == b.EventTime.IsZero() &&
		maps.Equal(a.Headers, b.Headers) && maps.EqualFunc(a.Metadata, b.Metadata, func(x, y map[string][]byte) bool {
		return maps.EqualFunc(x, y, bytes.Equal)
	})
}

func roundTrip(t *testing.T, m isb.Message) isb.Message {
	t.Helper()
	b := appendMessage(nil, &m)
	if len(b) != encodedSize(&m) {
		t.Fatalf("encoded %d bytes, encodedSize says %d", len(b), encodedSize(&m))
	}
	var got isb.Message
	if err := decodeMessage(b, &got, nil); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMessageRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 200_000)
	cases := []struct {
		name string
		m    isb.Message
	}{
		{"zero", isb.Message{}},
		{"id only", isb.Message{ID: "42"}},
		{"nil keys", isb.Message{ID: "a", Keys: nil, Value: []byte("x")}},
		{"empty keys", isb.Message{ID: "a", Keys: []string{}, Value: []byte("x")}},
		{"empty key strings", isb.Message{Keys: []string{"", "b", ""}}},
		{"empty value", isb.Message{ID: "a", Value: []byte{}}},
		{"binary value", isb.Message{Value: []byte{0, 1, 2, 0xff, 0}}},
		{"big value", isb.Message{ID: "big", Value: big}},
		{"zero time", isb.Message{ID: "a", EventTime: time.Time{}}},
		{"epoch", isb.Message{EventTime: time.Unix(0, 0)}},
		{"before epoch", isb.Message{EventTime: time.Unix(-12345, 678)}},
		{"nanoseconds", isb.Message{EventTime: time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)}},
		{"nil headers", isb.Message{ID: "a", Headers: nil}},
		{"empty headers", isb.Message{ID: "a", Headers: map[string]string{}}},
		{"headers", isb.Message{Headers: map[string]string{"a": "1", "": "empty key", "empty value": "", "ü": "ß"}}},
		{"metadata", isb.Message{Metadata: isb.Metadata{"g": {"k": []byte("v"), "empty": nil}, "h": {"x": {0, 1}}}}},
		{"everything", isb.Message{ID: "id-1", Keys: []string{"k1", "k2"}, Value: []byte("value"),
			EventTime: time.Unix(1700000000, 5), Headers: map[string]string{"h": "v"},
			Metadata: isb.Metadata{"g": {"k": []byte("v")}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := roundTrip(t, c.m); !sameMessage(got, c.m) {
				t.Fatalf("round trip of %+v gave %+v", c.m, got)
			}
		})
	}
}

func TestMessageDropsTags(t *testing.T) {
	if got := roundTrip(t, isb.Message{ID: "a", Tags: []string{"t"}}); got.Tags != nil {
		t.Fatalf("tags %v survived", got.Tags)
	}
}

// Decoding skips fields it does not know and takes the last of a repeated
// scalar, as protobuf does.
func TestMessageDecodeSkipsUnknownFields(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendString(b, "future")
	b = protowire.AppendTag(b, 98, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	m := isb.Message{ID: "x", Keys: []string{"k"}}
	b = appendMessage(b, &m)
	var got isb.Message
	if err := decodeMessage(b, &got, nil); err != nil {
		t.Fatal(err)
	}
	if !sameMessage(got, m) {
		t.Fatalf("got %+v", got)
	}
}

// Messages decoded into one key arena keep their own keys, also once the
// arena has grown, and appending to one's keys leaves the next one's alone.
func TestMessageKeyArena(t *testing.T) {
	keys := jsconsumer.NewKeys(2)
	var got []isb.Message
	var want []isb.Message
	for i, ks := range [][]string{{"a", "b"}, nil, {"c"}, {"d", "e", "f"}} {
		m := isb.Message{ID: strconv.Itoa(i), Keys: ks}
		var d isb.Message
		if err := decodeMessage(appendMessage(nil, &m), &d, keys); err != nil {
			t.Fatal(err)
		}
		want, got = append(want, m), append(got, d)
	}
	got[0].Keys = append(got[0].Keys, "x")
	want[0].Keys = append(want[0].Keys, "x")
	for i := range want {
		if !sameMessage(got[i], want[i]) {
			t.Errorf("message %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestMessageDecodeErrors(t *testing.T) {
	good := appendMessage(nil, &isb.Message{ID: "abc", Value: []byte("value"), Headers: map[string]string{"k": "v"}})
	// good is id (2+3 bytes), value (2+5), headers (2+6): cuts inside a
	// field fail, cuts between fields decode the fields before.
	boundaries := map[int]bool{5: true, 12: true}
	for cut := 1; cut < len(good); cut++ {
		var m isb.Message
		err := decodeMessage(good[:cut], &m, nil)
		if boundaries[cut] != (err == nil) {
			t.Errorf("truncated at %d of %d: error %v", cut, len(good), err)
		}
	}
	cases := map[string][]byte{
		"bad tag":           {0xff, 0xff, 0xff},
		"id as varint":      {0x08, 0x01, 0x12},
		"long length":       {0x0a, 0x10, 'a'},
		"event time cut":    {0x20, 0x80},
		"bad header entry":  {0x2a, 0x02, 0x0a, 0x05},
		"group wire type":   {0x33},
		"zero field number": {0x00, 0x01},
	}
	for name, b := range cases {
		var m isb.Message
		if err := decodeMessage(b, &m, nil); err == nil {
			t.Errorf("%s: no error, decoded %+v", name, m)
		}
	}
}

func FuzzMessage(f *testing.F) {
	f.Add("id", "k1", "k2", []byte("value"), int64(1700000000123456789), "h", "v")
	f.Add("", "", "", []byte(nil), int64(0), "", "")
	f.Add("x", "", "b", []byte{0, 0xff}, int64(-1), "ü", "")
	f.Fuzz(func(t *testing.T, id, k1, k2 string, value []byte, nanos int64, hk, hv string) {
		m := isb.Message{ID: id, Value: value}
		if k1 != "" || k2 != "" {
			m.Keys = []string{k1, k2}
		}
		if nanos != 0 {
			m.EventTime = time.Unix(0, nanos)
		}
		if hk != "" || hv != "" {
			m.Headers = map[string]string{hk: hv}
		}
		if got := roundTrip(t, m); !sameMessage(got, m) {
			t.Fatalf("round trip of %+v gave %+v", m, got)
		}
		// Arbitrary bytes never panic.
		var junk isb.Message
		_ = decodeMessage(value, &junk, nil)
	})
}
