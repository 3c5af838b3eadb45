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
