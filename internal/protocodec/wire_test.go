package protocodec

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestNextAndCount reads a message of a varint, two bytes fields and a
// fixed32 field field by field, and fails on it cut short.
func TestNextAndCount(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "a")
	b = protowire.AppendTag(b, 5, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 9)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "bc")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "d")

	var got []string
	for p := b; len(p) > 0; {
		num, v, rest, err := NextBytes(p, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		if num != 0 {
			got = append(got, string(v))
		}
		p = rest
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "bc" {
		t.Fatalf("NextBytes read %q; want the two fields 2", got)
	}
	if num, v, _, err := NextVarint(b, 1, 1); err != nil || num != 1 || v != 7 {
		t.Fatalf("NextVarint = %d, %d, %v; want field 1, 7", num, v, err)
	}
	if num, _, rest, err := NextVarint(b[2:], 1, 1); err != nil || num != 0 || len(rest) != 0 {
		t.Fatalf("NextVarint past field 1 = %d, %v; want none", num, err)
	}
	if n2, n3, err := CountBytes(b, 2, 3); err != nil || n2 != 2 || n3 != 1 {
		t.Fatalf("CountBytes = %d, %d, %v; want 2, 1", n2, n3, err)
	}
	cut := b[:len(b)-1]
	if _, _, err := CountBytes(cut, 2, 3); err == nil {
		t.Fatal("CountBytes of a message cut short: no error")
	}
	var err error
	for p := cut; len(p) > 0 && err == nil; {
		_, _, p, err = NextBytes(p, 3, 3)
	}
	if err == nil {
		t.Fatal("NextBytes over a message cut short: no error")
	}
}
