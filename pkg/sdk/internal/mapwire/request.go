package mapwire

import (
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/protocodec"
	"github.com/sluiceflow/sluice/internal/protocodec/mapv1wire"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
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
	return mapv1wire.DecodeEnvelope(b, a, &r.id, &r.handshake, &r.eot, func(v []byte) error {
		r.hasMessage = true
		return r.decodeMessage(v, a)
	})
}

// decodeMessage decodes a MapRequest.Request, merged into what r holds.
func (r *Request) decodeMessage(b []byte, a *protocodec.Arena) error {
	nk, _, err := protocodec.CountBytes(b, mapv1wire.FieldReqKeys, 0)
	if err != nil {
		return err
	}
	keys := a.Strings(nk)[:0]
	for len(b) > 0 {
		// b is well-formed (CountBytes): the fields are read unchecked.
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if typ != protowire.BytesType || num < mapv1wire.FieldReqKeys || num > mapv1wire.FieldReqMetadata {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		b = b[n:]
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
		num, s, rest, err := protocodec.NextBytes(b, mapv1wire.FieldMapKey, mapv1wire.FieldMapVal)
		if err != nil {
			return err
		}
		b = rest
		if num == 0 {
			break
		}
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
		num, v, rest, err := protocodec.NextVarint(b, mapv1wire.FieldSeconds, mapv1wire.FieldNanos)
		if err != nil {
			return t, err
		}
		b = rest
		switch num {
		case mapv1wire.FieldSeconds:
			t.seconds = int64(v)
		case mapv1wire.FieldNanos:
			t.nanos = int32(v)
		}
	}
	return t, nil
}
