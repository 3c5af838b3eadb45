// Package mapv1wire holds what both ends of the map.v1 stream need to write and
// read its messages by hand: the field numbers of MapRequest, MapResponse and
// the messages in them, and the Handshake and TransmissionStatus flags. The
// runtime (pkg/udf) encodes requests and decodes answers; the SDK's map
// servers do the reverse.
package mapv1wire

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluiceflow/sluice/internal/protocodec"
)

// Field numbers of map.v1 and of google.protobuf.Timestamp.
const (
	FieldRequest   = 1 // MapRequest.request, MapResponse.results
	FieldID        = 2 // MapRequest.id, MapResponse.id
	FieldHandshake = 3 // MapRequest.handshake, MapResponse.handshake
	FieldStatus    = 4 // MapRequest.status, MapResponse.status

	FieldReqKeys      = 1
	FieldReqValue     = 2
	FieldReqEventTime = 3
	FieldReqWatermark = 4
	FieldReqHeaders   = 5
	FieldReqMetadata  = 6

	FieldResKeys     = 1
	FieldResValue    = 2
	FieldResTags     = 3
	FieldResMetadata = 4
	FieldResNack     = 5

	FieldFlag    = 1 // Handshake.sot, TransmissionStatus.eot
	FieldSeconds = 1 // Timestamp.seconds
	FieldNanos   = 2 // Timestamp.nanos
	FieldMapKey  = 1 // the key of a map entry
	FieldMapVal  = 2 // the value of a map entry
)

// ErrInvalidUTF8 is the decoding error for a string field that is not
// UTF-8, which proto3 forbids.
var ErrInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// AppendFlag appends a Handshake{sot: true} or TransmissionStatus{eot: true}
// as field num.
func AppendFlag(b []byte, num protowire.Number) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, 2)
	b = protowire.AppendTag(b, FieldFlag, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// DecodeFlag decodes a Handshake or a TransmissionStatus, merged into the
// value of its flag so far.
func DecodeFlag(b []byte, flag bool) (bool, error) {
	for len(b) > 0 {
		num, v, rest, err := protocodec.NextVarint(b, FieldFlag, FieldFlag)
		if err != nil {
			return false, err
		}
		if num == FieldFlag {
			flag = v != 0
		}
		b = rest
	}
	return flag, nil
}

// DecodeEnvelope decodes a MapRequest or a MapResponse, merged into what it
// has so far: the id (its string in a), the handshake and the status flags,
// and each request or result (field 1), in order, handed to payload.
func DecodeEnvelope(b []byte, a *protocodec.Arena, id *string, handshake, eot *bool, payload func(v []byte) error) error {
	for len(b) > 0 {
		num, v, rest, err := protocodec.NextBytes(b, FieldRequest, FieldStatus)
		if err != nil {
			return err
		}
		b = rest
		switch num {
		case FieldRequest:
			err = payload(v)
		case FieldID:
			if !utf8.Valid(v) {
				return ErrInvalidUTF8
			}
			*id = a.String(v)
		case FieldHandshake:
			*handshake, err = DecodeFlag(v, *handshake)
		case FieldStatus:
			*eot, err = DecodeFlag(v, *eot)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
