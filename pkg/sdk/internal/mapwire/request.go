package mapwire

import (
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/protocodec"
	"github.com/sluiceflow/sluice/pkg/protocodec/mapv1wire"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
)

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
		if typ != protowire.BytesType || num < mapv1wire.FieldRequest || num > mapv1wire.FieldStatus {
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
		case mapv1wire.FieldRequest:
			r.hasMessage = true
			err = r.decodeMessage(v, a)
		case mapv1wire.FieldID:
			if !utf8.Valid(v) {
				return mapv1wire.ErrInvalidUTF8
			}
			r.id = a.String(v)
		case mapv1wire.FieldHandshake:
			r.handshake, err = mapv1wire.DecodeFlag(v, r.handshake)
		case mapv1wire.FieldStatus:
			r.eot, err = mapv1wire.DecodeFlag(v, r.eot)
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
		if num == mapv1wire.FieldReqKeys && typ == protowire.BytesType {
			nk++
		}
	}
	keys := a.Strings(nk)[:0]
	for len(b) > 0 {
		num, typ, n := protocodec.ConsumeTag(b)
		b = b[n:]
		if typ != protowire.BytesType || num < mapv1wire.FieldReqKeys || num > mapv1wire.FieldReqMetadata {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		b = b[n:]
		var err error
		switch num {
		case mapv1wire.FieldReqKeys:
			if !utf8.Valid(v) {
				return mapv1wire.ErrInvalidUTF8
			}
			keys = append(keys, a.String(v))
		case mapv1wire.FieldReqValue:
			r.value = a.Bytes(v)
		case mapv1wire.FieldReqEventTime:
			r.eventTime, err = decodeTimestamp(v, r.eventTime)
		case mapv1wire.FieldReqWatermark:
			r.watermark, err = decodeTimestamp(v, r.watermark)
		case mapv1wire.FieldReqHeaders:
			err = r.decodeHeader(v, a)
		case mapv1wire.FieldReqMetadata:
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
		if typ != protowire.BytesType || (num != mapv1wire.FieldMapKey && num != mapv1wire.FieldMapVal) {
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
			return mapv1wire.ErrInvalidUTF8
		}
		if num == mapv1wire.FieldMapKey {
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
		if typ == protowire.VarintType && (num == mapv1wire.FieldSeconds || num == mapv1wire.FieldNanos) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return t, protowire.ParseError(n)
			}
			b = b[n:]
			if num == mapv1wire.FieldSeconds {
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
