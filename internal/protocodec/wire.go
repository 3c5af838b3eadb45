package protocodec

import "google.golang.org/protobuf/encoding/protowire"

// badFieldNumber is protowire's error code for an invalid field number,
// which protowire.ParseError turns into an error.
var _, _, badFieldNumber = protowire.ConsumeTag([]byte{0})

// ConsumeTag is protowire.ConsumeTag for decoders that must fail where
// proto.Unmarshal fails: it also rejects field numbers above
// protowire.MaxValidNumber.
func ConsumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, badFieldNumber
	}
	return num, typ, n
}

// NextBytes reads b up to its next field of type bytes numbered lo to hi,
// skipping the fields before it, and returns the field's number, its value
// and the rest of b after it; num is 0 (and rest empty) when there is none.
// It fails where proto.Unmarshal fails on the fields it reads.
func NextBytes(b []byte, lo, hi protowire.Number) (num protowire.Number, v, rest []byte, err error) {
	for len(b) > 0 {
		num, typ, n := ConsumeTag(b)
		if n < 0 {
			return 0, nil, nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType && num >= lo && num <= hi {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, nil, nil, protowire.ParseError(n)
			}
			return num, v, b[n:], nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, nil, nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return 0, nil, nil, nil
}

// NextVarint is NextBytes for a field of type varint.
func NextVarint(b []byte, lo, hi protowire.Number) (num protowire.Number, v uint64, rest []byte, err error) {
	for len(b) > 0 {
		num, typ, n := ConsumeTag(b)
		if n < 0 {
			return 0, 0, nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && num >= lo && num <= hi {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, nil, protowire.ParseError(n)
			}
			return num, v, b[n:], nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, 0, nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return 0, 0, nil, nil
}

// CountBytes checks that b is well-formed, as proto.Unmarshal would find
// it, and counts its fields of type bytes numbered x and y: a decoder
// sizes its repeated fields with it.
func CountBytes(b []byte, x, y protowire.Number) (nx, ny int, err error) {
	for len(b) > 0 {
		num, typ, n := ConsumeTag(b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case typ != protowire.BytesType:
		case num == x:
			nx++
		case num == y:
			ny++
		}
	}
	return nx, ny, nil
}
