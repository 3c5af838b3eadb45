package mapwire

import (
	"errors"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/protocodec"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
)

// Field numbers of map.v1 and of google.protobuf.Timestamp.
const (
	fieldRequest   = 1 // MapRequest.request, MapResponse.results
	fieldID        = 2 // MapRequest.id, MapResponse.id
	fieldHandshake = 3 // MapRequest.handshake, MapResponse.handshake
	fieldStatus    = 4 // MapRequest.status, MapResponse.status

	fieldReqKeys      = 1
	fieldReqValue     = 2
	fieldReqEventTime = 3
	fieldReqWatermark = 4
	fieldReqHeaders   = 5
	fieldReqMetadata  = 6

	fieldResKeys     = 1
	fieldResValue    = 2
	fieldResTags     = 3
	fieldResMetadata = 4
	fieldResNack     = 5

	fieldFlag    = 1 // Handshake.sot, TransmissionStatus.eot
	fieldSeconds = 1 // Timestamp.seconds
	fieldNanos   = 2 // Timestamp.nanos
	fieldMapKey  = 1 // the key of a map entry
	fieldMapVal  = 2 // the value of a map entry
)

// errInvalidUTF8 is the decoding error for a string field that is not
// UTF-8, which proto3 forbids.
var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// timestamp is a google.protobuf.Timestamp, set when present on the wire.
type timestamp struct {
	seconds int64
	nanos   int32
	set     bool
}

// time is t as the generated Timestamp's AsTime gives it; zero when t is
// absent.
func (t timestamp) time() time.Time {
	if !t.set {
		return time.Time{}
	}
	return time.Unix(t.seconds, int64(t.nanos)).UTC()
}

// Request is a map.v1.MapRequest: the handshake, the end of a batch, or a
// message. It is the Datum of its message, without a copy: its accessors
// return the request's data. A Request does not change once decoded.
type Request struct {
	id         string
	keys       []string
	value      []byte
	eventTime  timestamp
	watermark  timestamp
	headers    map[string]string
	metadata   *common.Metadata
	hasMessage bool
	handshake  bool
	eot        bool
}

// HasMessage reports whether the request carries a message.
func (r *Request) HasMessage() bool { return r.hasMessage }

// ID identifies the message within the runtime.
func (r *Request) ID() string { return r.id }

// Keys are the message's keys.
func (r *Request) Keys() []string { return r.keys }

// Value is the message's payload.
func (r *Request) Value() []byte { return r.value }

// EventTime is the message's event time (zero if the runtime sent none).
func (r *Request) EventTime() time.Time { return r.eventTime.time() }

// Watermark is the watermark when the message was read (zero if the runtime
// sent none).
func (r *Request) Watermark() time.Time { return r.watermark.time() }

// Headers are the message's headers.
func (r *Request) Headers() map[string]string { return r.headers }

// UserMetadata is a copy of the message's user metadata, never nil.
func (r *Request) UserMetadata() *metadata.UserMetadata { return metadata.FromProto(r.metadata) }

// UnmarshalWire decodes b, as proto.Unmarshal decodes a MapRequest, into r;
// what r keeps is copied out of b.
func (r *Request) UnmarshalWire(b []byte) error {
	*r = Request{}
	a := protocodec.GetArena()
	defer a.Release()
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType || num < fieldRequest || num > fieldStatus {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var err error
		switch num {
		case fieldRequest:
			r.hasMessage = true
			err = r.decodeMessage(v, a)
		case fieldID:
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
			r.id = a.String(v)
		case fieldHandshake:
			r.handshake, err = decodeFlag(v, r.handshake)
		case fieldStatus:
			r.eot, err = decodeFlag(v, r.eot)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeMessage decodes a MapRequest.Request, merged into what r holds.
func (r *Request) decodeMessage(b []byte, a *protocodec.Arena) error {
	nk := 0
	for p := b; len(p) > 0; {
		num, typ, n := protocodec.ConsumeTag(p)
		if n < 0 {
			return protowire.ParseError(n)
		}
		p = p[n:]
		if n = protowire.ConsumeFieldValue(num, typ, p); n < 0 {
			return protowire.ParseError(n)
		}
		p = p[n:]
		if num == fieldReqKeys && typ == protowire.BytesType {
			nk++
		}
	}
	keys := a.Strings(nk)[:0]
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		b = b[n:]
		if typ != protowire.BytesType || num < fieldReqKeys || num > fieldReqMetadata {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		b = b[n:]
		var err error
		switch num {
		case fieldReqKeys:
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
			keys = append(keys, a.String(v))
		case fieldReqValue:
			r.value = a.Bytes(v)
		case fieldReqEventTime:
			r.eventTime, err = decodeTimestamp(v, r.eventTime)
		case fieldReqWatermark:
			r.watermark, err = decodeTimestamp(v, r.watermark)
		case fieldReqHeaders:
			err = r.decodeHeader(v, a)
		case fieldReqMetadata:
			if r.metadata == nil {
				r.metadata = new(common.Metadata)
			}
			err = proto.UnmarshalOptions{Merge: true}.Unmarshal(v, r.metadata)
		}
		if err != nil {
			return err
		}
	}
	if r.keys == nil {
		r.keys = keys
	} else {
		r.keys = append(r.keys, keys...)
	}
	return nil
}

// decodeHeader decodes an entry of the headers map into r.headers.
func (r *Request) decodeHeader(b []byte, a *protocodec.Arena) error {
	var k, v string
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != fieldMapKey && num != fieldMapVal) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if !utf8.Valid(s) {
			return errInvalidUTF8
		}
		if num == fieldMapKey {
			k = a.String(s)
		} else {
			v = a.String(s)
		}
	}
	if r.headers == nil {
		r.headers = make(map[string]string)
	}
	r.headers[k] = v
	return nil
}

// decodeTimestamp decodes a Timestamp, merged into t.
func decodeTimestamp(b []byte, t timestamp) (timestamp, error) {
	t.set = true
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		if n < 0 {
			return t, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == fieldSeconds || num == fieldNanos) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return t, protowire.ParseError(n)
			}
			b = b[n:]
			if num == fieldSeconds {
				t.seconds = int64(v)
			} else {
				t.nanos = int32(v)
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return t, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return t, nil
}

// decodeFlag decodes a Handshake or a TransmissionStatus, merged into the
// value of its flag so far.
func decodeFlag(b []byte, flag bool) (bool, error) {
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		if n < 0 {
			return false, protowire.ParseError(n)
		}
		b = b[n:]
		if num == fieldFlag && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false, protowire.ParseError(n)
			}
			b, flag = b[n:], v != 0
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return flag, nil
}
