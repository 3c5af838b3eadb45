package protocodec_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluiceflow/sluice/internal/protocodec"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
)

// request is a map request of n bytes of value.
func request(id string, n int) *mapv1.MapRequest {
	return &mapv1.MapRequest{Id: id, Request: &mapv1.MapRequest_Request{Keys: []string{"k"}, Value: bytes.Repeat([]byte{'v'}, n),
		EventTime: timestamppb.New(time.Unix(1_700_000_000, 5))}}
}

// Codec puts on the wire what gRPC's own codec does, small message or large.
func TestMarshalIsTheDefaults(t *testing.T) {
	def := encoding.GetCodecV2("proto")
	for _, n := range []int{0, 10, protocodec.PoolThreshold, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := request("1-1", n)
			got, err := protocodec.Codec{}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Free()
			want, err := def.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Free()
			if !bytes.Equal(got.Materialize(), want.Materialize()) {
				t.Fatalf("encoding %x, the default codec's %x", got.Materialize(), want.Materialize())
			}
			back := new(mapv1.MapRequest)
			if err := (protocodec.Codec{}).Unmarshal(got, back); err != nil || !proto.Equal(back, m) {
				t.Fatalf("decoded as %v, %v; want %v", back, err, m)
			}
		})
	}
}

// Encodings carved out of shared chunks by goroutines at once stay each its
// own.
func TestMarshalConcurrently(t *testing.T) {
	const goroutines, each = 4, 500
	var wg sync.WaitGroup
	encoded := make([][]mem.BufferSlice, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				b, err := protocodec.Codec{}.Marshal(request(fmt.Sprint(g, "-", i), i%50))
				if err != nil {
					t.Error(err)
					return
				}
				encoded[g] = append(encoded[g], b)
			}
		})
	}
	wg.Wait()
	for g := range goroutines {
		for i, b := range encoded[g] {
			want, _ := proto.Marshal(request(fmt.Sprint(g, "-", i), i%50))
			if !bytes.Equal(b.Materialize(), want) {
				t.Fatalf("message %d-%d changed after it was encoded", g, i)
			}
			b.Free()
		}
	}
}

// flag encodes and decodes itself as a Handshake.
type flag struct{ sot bool }

func (f *flag) MarshalSize() int { return 2 }

func (f *flag) MarshalAppend(b []byte) ([]byte, error) {
	v := byte(0)
	if f.sot {
		v = 1
	}
	return append(b, 0x08, v), nil
}

func (f *flag) UnmarshalWire(b []byte) error {
	h := new(mapv1.Handshake)
	if err := proto.Unmarshal(b, h); err != nil {
		return err
	}
	f.sot = h.GetSot()
	return nil
}

// Values that encode and decode themselves are encoded and decoded by
// their own methods.
func TestMarshalerAndUnmarshaler(t *testing.T) {
	b, err := protocodec.Codec{}.Marshal(&flag{sot: true})
	if err != nil {
		t.Fatal(err)
	}
	h := new(mapv1.Handshake)
	if err := proto.Unmarshal(b.Materialize(), h); err != nil || !h.GetSot() {
		t.Fatalf("decoded as %v, %v", h, err)
	}
	var f flag
	if err := (protocodec.Codec{}).Unmarshal(b, &f); err != nil || !f.sot {
		t.Fatalf("decoded as %+v, %v", f, err)
	}
	if _, err := (protocodec.Codec{}).Marshal(42); err == nil {
		t.Error("marshaling an int did not fail")
	}
	if err := (protocodec.Codec{}).Unmarshal(b, new(int)); err == nil {
		t.Error("unmarshaling into an int did not fail")
	}
}

func TestArena(t *testing.T) {
	a := protocodec.GetArena()
	defer a.Release()
	src := []byte("hello")
	b, s := a.Bytes(src), a.String(src)
	copy(src, "HELLO")
	if string(b) != "hello" || s != "hello" {
		t.Fatalf("copies %q, %q changed with their source", b, s)
	}
	if a.Bytes(nil) != nil || a.String(nil) != "" || a.Strings(0) != nil {
		t.Error("empty copies must be nil and empty")
	}
	large := bytes.Repeat([]byte{'x'}, 100_000)
	if got := a.Bytes(large); !bytes.Equal(got, large) {
		t.Error("large copy differs")
	}
	ss := a.Strings(2)
	next := a.Strings(2)
	next[0] = "next"
	ss = append(ss, "third") // must not overwrite next
	if len(ss) != 3 || next[0] != "next" || cap(a.Strings(3)) != 3 {
		t.Errorf("strings %q, next %q", ss, next)
	}
}

func TestConsumeTag(t *testing.T) {
	for _, c := range []struct {
		b  []byte
		ok bool
	}{
		{[]byte{0x08}, true},
		{[]byte{0x00}, false},
		{[]byte{0xf8, 0xff, 0xff, 0xff, 0x0f}, true},  // field 2^29-1, the largest
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x10}, false}, // field 2^29
	} {
		_, _, n := protocodec.ConsumeTag(c.b)
		if (n > 0) != c.ok {
			t.Errorf("ConsumeTag(%x) = %d", c.b, n)
		}
		want := proto.Unmarshal(append(c.b, 0), new(common.Metadata)) == nil
		if want != c.ok {
			t.Errorf("proto.Unmarshal of tag %x: ok %t", c.b, want)
		}
	}
}
