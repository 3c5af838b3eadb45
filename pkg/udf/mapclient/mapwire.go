package mapclient

import (
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/protocodec"
	"github.com/sluiceflow/sluice/internal/protocodec/mapv1wire"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// The map stream's messages are encoded and decoded by hand, straight from
// and into the runtime's own values: the wire is map.v1's MapRequest and
// MapResponse, field for field (mapwire_test.go compares them with the
// generated messages).

// timestamp is a google.protobuf.Timestamp.
type timestamp struct {
	seconds int64
	nanos   int32
}

func (t timestamp) size() int {
	n := 0
	if t.seconds != 0 {
		n += 1 + protowire.SizeVarint(uint64(t.seconds))
	}
	if t.nanos != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(t.nanos)))
	}
	return n
}

func (t timestamp) append(b []byte) []byte {
	if t.seconds != 0 {
		b = protowire.AppendTag(b, mapv1wire.FieldSeconds, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(t.seconds))
	}
	if t.nanos != 0 {
		b = protowire.AppendTag(b, mapv1wire.FieldNanos, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(t.nanos)))
	}
	return b
}

// mapRequest is a map.v1.MapRequest: the start-of-transmission handshake,
// the end of a batch, or a message with the id prefix+index.
type mapRequest struct {
	msg       *isb.Message // the message of the request; nil for none
	prefix    string
	index     int
	eventTime timestamp
	watermark timestamp
	metadata  *common.Metadata // msg.Metadata's wire form; nil for none
	mdSize    int
	body      int // the size of the encoded msg, once MarshalSize has run
	handshake bool
	eot       bool
}

var _ protocodec.Marshaler = (*mapRequest)(nil)

// setMessage makes r the request for m with id prefix+index.
func (r *mapRequest) setMessage(m *isb.Message, prefix string, index int, eventTime, watermark timestamp, md *common.Metadata) {
	*r = mapRequest{msg: m, prefix: prefix, index: index, eventTime: eventTime, watermark: watermark, metadata: md}
	if md != nil {
		r.mdSize = proto.Size(md)
	}
}

func (r *mapRequest) idSize() int {
	if r.msg == nil {
		return 0
	}
	return len(r.prefix) + decimalDigits(r.index)
}

func decimalDigits(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}

func (r *mapRequest) bodySize() int {
	m := r.msg
	n := 0
	for _, k := range m.Keys {
		n += 1 + protowire.SizeBytes(len(k))
	}
	if len(m.Value) > 0 {
		n += 1 + protowire.SizeBytes(len(m.Value))
	}
	n += 1 + protowire.SizeBytes(r.eventTime.size())
	n += 1 + protowire.SizeBytes(r.watermark.size())
	for k, v := range m.Headers {
		n += 1 + protowire.SizeBytes(mapEntrySize(k, v))
	}
	if r.metadata != nil {
		n += 1 + protowire.SizeBytes(r.mdSize)
	}
	return n
}

// mapEntrySize is the size of a map<string, string> entry; like the
// generated code, an entry always carries its key and its value.
func mapEntrySize(k, v string) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(len(v))
}

// MarshalSize returns the length of r's encoding.
func (r *mapRequest) MarshalSize() int {
	n := 0
	if r.msg != nil {
		r.body = r.bodySize()
		n += 1 + protowire.SizeBytes(r.body)
	}
	if id := r.idSize(); id > 0 {
		n += 1 + protowire.SizeBytes(id)
	}
	if r.handshake {
		n += 1 + protowire.SizeBytes(2)
	}
	if r.eot {
		n += 1 + protowire.SizeBytes(2)
	}
	return n
}

// MarshalAppend appends r's encoding to b. Like the generated code, it
// fails on a string that is not UTF-8.
func (r *mapRequest) MarshalAppend(b []byte) ([]byte, error) {
	if m := r.msg; m != nil {
		if r.body == 0 {
			r.body = r.bodySize()
		}
		b = protowire.AppendTag(b, mapv1wire.FieldRequest, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.body))
		for _, k := range m.Keys {
			if !utf8.ValidString(k) {
				return b, mapv1wire.ErrInvalidUTF8
			}
			b = protowire.AppendTag(b, mapv1wire.FieldReqKeys, protowire.BytesType)
			b = protowire.AppendString(b, k)
		}
		if len(m.Value) > 0 {
			b = protowire.AppendTag(b, mapv1wire.FieldReqValue, protowire.BytesType)
			b = protowire.AppendBytes(b, m.Value)
		}
		b = protowire.AppendTag(b, mapv1wire.FieldReqEventTime, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.eventTime.size()))
		b = r.eventTime.append(b)
		b = protowire.AppendTag(b, mapv1wire.FieldReqWatermark, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.watermark.size()))
		b = r.watermark.append(b)
		for k, v := range m.Headers {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return b, mapv1wire.ErrInvalidUTF8
			}
			b = protowire.AppendTag(b, mapv1wire.FieldReqHeaders, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(mapEntrySize(k, v)))
			b = protowire.AppendTag(b, mapv1wire.FieldMapKey, protowire.BytesType)
			b = protowire.AppendString(b, k)
			b = protowire.AppendTag(b, mapv1wire.FieldMapVal, protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
		if r.metadata != nil {
			b = protowire.AppendTag(b, mapv1wire.FieldReqMetadata, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(r.mdSize))
			var err error
			if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, r.metadata); err != nil {
				return b, err
			}
		}
		b = protowire.AppendTag(b, mapv1wire.FieldID, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.idSize()))
		b = append(b, r.prefix...)
		b = strconv.AppendInt(b, int64(r.index), 10)
	}
	if r.handshake {
		b = mapv1wire.AppendFlag(b, mapv1wire.FieldHandshake)
	}
	if r.eot {
		b = mapv1wire.AppendFlag(b, mapv1wire.FieldStatus)
	}
	return b, nil
}

// mapStream is the map stream: requests sent as they are, answers decoded
// into one mapResponse, reused answer after answer (whoever receives is done
// with an answer when it asks for the next: the results are copied out).
type mapStream struct {
	grpc.ClientStream
	resp mapResponse
}

var _ grpc.BidiStreamingClient[mapRequest, mapResponse] = (*mapStream)(nil)

// Send sends r.
func (s *mapStream) Send(r *mapRequest) error { return s.SendMsg(r) }

// Recv receives the next answer, valid until the next Recv.
func (s *mapStream) Recv() (*mapResponse, error) {
	if err := s.RecvMsg(&s.resp); err != nil {
		return nil, err
	}
	return &s.resp, nil
}

// mapResponse is a map.v1.MapResponse as the runtime keeps it.
type mapResponse struct {
	id        string
	results   []result
	handshake bool // handshake.sot
	eot       bool // status.eot
	one       [1]result
}

var _ protocodec.Unmarshaler = (*mapResponse)(nil)

// emptyMetadata is the metadata of a result that carried an empty one. It
// is shared and must not be changed.
var emptyMetadata = &common.Metadata{}

// UnmarshalWire decodes b, as proto.Unmarshal decodes a MapResponse, into r.
func (r *mapResponse) UnmarshalWire(b []byte) error {
	*r = mapResponse{}
	a := protocodec.GetArena()
	defer a.Release()
	return mapv1wire.DecodeEnvelope(b, a, &r.id, &r.handshake, &r.eot, func(v []byte) error {
		r.results = r.nextResult()
		return decodeResult(v, a, &r.results[len(r.results)-1])
	})
}

// nextResult returns r.results with one more, zero, result.
func (r *mapResponse) nextResult() []result {
	if r.results == nil {
		return r.one[:1]
	}
	return append(r.results, result{})
}

// decodeResult decodes a MapResponse.Result into res, its strings and
// bytes copied into a.
func decodeResult(b []byte, a *protocodec.Arena, res *result) error {
	nk, nt, err := protocodec.CountBytes(b, mapv1wire.FieldResKeys, mapv1wire.FieldResTags)
	if err != nil {
		return err
	}
	res.keys, res.tags = a.Strings(nk), a.Strings(nt)
	nk, nt = 0, 0
	for len(b) > 0 {
		// b is well-formed (CountBytes): the fields are read unchecked.
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if typ != protowire.BytesType || num < mapv1wire.FieldResKeys || num > mapv1wire.FieldResNack {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		b = b[n:]
		switch num {
		case mapv1wire.FieldResKeys, mapv1wire.FieldResTags:
			if !utf8.Valid(v) {
				return mapv1wire.ErrInvalidUTF8
			}
			if num == mapv1wire.FieldResKeys {
				res.keys[nk] = a.String(v)
				nk++
			} else {
				res.tags[nt] = a.String(v)
				nt++
			}
		case mapv1wire.FieldResValue:
			res.value = a.Bytes(v)
		case mapv1wire.FieldResMetadata:
			if len(v) == 0 && res.metadata == nil {
				res.metadata = emptyMetadata
				continue
			}
			if res.metadata == nil || res.metadata == emptyMetadata {
				res.metadata = new(common.Metadata)
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, res.metadata); err != nil {
				return err
			}
		case mapv1wire.FieldResNack:
			if res.nack == nil {
				res.nack = new(common.NackOptions)
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, res.nack); err != nil {
				return err
			}
		}
	}
	return nil
}
