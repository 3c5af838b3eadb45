package mapwire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/internal/protocodec/mapv1wire"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/metadata"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/nack"
)

// Response is a map.v1.MapResponse: the handshake's echo, the end of a
// batch or of a request's answers, or the answer to a request. It does not
// change once made, and shares what it sends with the messages it was made
// from, which must not change until it is sent.
type Response struct {
	id        string
	results   []result
	handshake bool
	eot       bool
	pooled    bool // made by GetResponse
	one       [1]result
}

// result is a MapResponse.Result, with the size of its encoding.
type result struct {
	keys     []string
	value    []byte
	tags     []string
	metadata *common.Metadata
	nack     *common.NackOptions
	mdSize   int
	nackSize int
	size     int
}

// setResult makes r the result for m (generic, so that m is not boxed into
// an interface). Like numaflow-go, every result carries a metadata, empty
// when m has no user metadata; nack options go only with the messages that
// have them.
func setResult[M Message](r *result, m M) {
	*r = result{keys: m.Keys(), value: m.Value(), tags: m.Tags(),
		metadata: metadata.ToProto(m.UserMetadata()), nack: nack.ToProto(m.NackOptions())}
	if r.metadata.GetPreviousVertex() != "" || len(r.metadata.GetSysMetadata()) > 0 || len(r.metadata.GetUserMetadata()) > 0 {
		r.mdSize = proto.Size(r.metadata)
	}
	for _, k := range r.keys {
		r.size += 1 + protowire.SizeBytes(len(k))
	}
	if len(r.value) > 0 {
		r.size += 1 + protowire.SizeBytes(len(r.value))
	}
	for _, t := range r.tags {
		r.size += 1 + protowire.SizeBytes(len(t))
	}
	if r.metadata != nil {
		r.size += 1 + protowire.SizeBytes(r.mdSize)
	}
	if r.nack != nil {
		r.nackSize = proto.Size(r.nack)
		r.size += 1 + protowire.SizeBytes(r.nackSize)
	}
}

// append appends r's encoding to b. Like the generated code, it fails on a
// string that is not UTF-8.
func (r *result) append(b []byte) ([]byte, error) {
	for _, k := range r.keys {
		if !utf8.ValidString(k) {
			return b, mapv1wire.ErrInvalidUTF8
		}
		b = protowire.AppendTag(b, mapv1wire.FieldResKeys, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	if len(r.value) > 0 {
		b = protowire.AppendTag(b, mapv1wire.FieldResValue, protowire.BytesType)
		b = protowire.AppendBytes(b, r.value)
	}
	for _, t := range r.tags {
		if !utf8.ValidString(t) {
			return b, mapv1wire.ErrInvalidUTF8
		}
		b = protowire.AppendTag(b, mapv1wire.FieldResTags, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	var err error
	if r.metadata != nil {
		b = protowire.AppendTag(b, mapv1wire.FieldResMetadata, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.mdSize))
		if r.mdSize > 0 {
			if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, r.metadata); err != nil {
				return b, err
			}
		}
	}
	if r.nack != nil {
		b = protowire.AppendTag(b, mapv1wire.FieldResNack, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.nackSize))
		b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, r.nack)
	}
	return b, err
}

// flagSize is the size of a Handshake{sot: true} or TransmissionStatus{eot:
// true} field.
const flagSize = 4

// MarshalSize returns the length of r's encoding.
func (r *Response) MarshalSize() int {
	n := 0
	for i := range r.results {
		n += 1 + protowire.SizeBytes(r.results[i].size)
	}
	if r.id != "" {
		n += 1 + protowire.SizeBytes(len(r.id))
	}
	if r.handshake {
		n += flagSize
	}
	if r.eot {
		n += flagSize
	}
	return n
}

// MarshalAppend appends r's encoding to b.
func (r *Response) MarshalAppend(b []byte) ([]byte, error) {
	for i := range r.results {
		b = protowire.AppendTag(b, mapv1wire.FieldRequest, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.results[i].size))
		var err error
		if b, err = r.results[i].append(b); err != nil {
			return b, err
		}
	}
	if r.id != "" {
		if !utf8.ValidString(r.id) {
			return b, mapv1wire.ErrInvalidUTF8
		}
		b = protowire.AppendTag(b, mapv1wire.FieldID, protowire.BytesType)
		b = protowire.AppendString(b, r.id)
	}
	if r.handshake {
		b = mapv1wire.AppendFlag(b, mapv1wire.FieldHandshake)
	}
	if r.eot {
		b = mapv1wire.AppendFlag(b, mapv1wire.FieldStatus)
	}
	return b, nil
}
