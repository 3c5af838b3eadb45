package protocodec

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Name is the codec's name, the default codec's: the content-subtype the
// peer sees is unchanged.
const Name = "proto"

// PoolThreshold is the largest encoding carved out of a chunk; larger ones
// use gRPC's buffer pool.
const PoolThreshold = 1 << 10

// chunkBytes and chunkBuffers size a chunk: room for about a hundred
// small messages.
const (
	chunkBytes   = 16 << 10
	chunkBuffers = 128
)

// Codec is the codec; its zero value is ready to use, and it is safe for
// concurrent use.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name returns [Name].
func (Codec) Name() string { return Name }

// chunk is where small encodings are carved from: bytes for their contents,
// bufs for the buffers that hold them and lists for the one-buffer slices
// gRPC takes. Only the goroutine that took the chunk from the pool carves
// from it.
type chunk struct {
	bytes []byte
	bufs  [chunkBuffers]mem.SliceBuffer
	lists [chunkBuffers]mem.Buffer
	n     int // bufs and lists used
}

var chunks = sync.Pool{New: func() any { return newChunk() }}

func newChunk() *chunk { return &chunk{bytes: make([]byte, 0, chunkBytes)} }

// Marshaler is a value that encodes itself as a protocol buffer message.
type Marshaler interface {
	// MarshalSize returns the length of the encoding.
	MarshalSize() int
	// MarshalAppend appends the encoding, MarshalSize bytes, to b.
	MarshalAppend(b []byte) ([]byte, error)
}

// Unmarshaler is a value that decodes itself from a protocol buffer
// message.
type Unmarshaler interface {
	// UnmarshalWire decodes b into the value, which must not keep b, nor
	// any part of it: b is reused once UnmarshalWire returns.
	UnmarshalWire(b []byte) error
}

// protoMarshaler is a proto.Message as a Marshaler: Size computes the
// size, which MarshalAppend then reuses.
type protoMarshaler struct{ m proto.Message }

func (p protoMarshaler) MarshalSize() int { return proto.Size(p.m) }

func (p protoMarshaler) MarshalAppend(b []byte) ([]byte, error) {
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, p.m)
}

// Marshal encodes v, a [Marshaler] or a proto.Message (as proto.Marshal
// does).
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	var m Marshaler
	switch v := v.(type) {
	case Marshaler:
		m = v
	default:
		pm := messageOf(v)
		if pm == nil {
			return nil, fmt.Errorf("protocodec: cannot marshal %T, not a protocol buffer", v)
		}
		m = protoMarshaler{pm}
	}
	size := m.MarshalSize()
	if size > PoolThreshold {
		pool := mem.DefaultBufferPool()
		buf := pool.Get(size)
		out, err := m.MarshalAppend((*buf)[:0])
		if err != nil {
			pool.Put(buf)
			return nil, err
		}
		*buf = out
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
	}
	c := chunks.Get().(*chunk)
	if c.n == chunkBuffers || cap(c.bytes)-len(c.bytes) < size {
		c = newChunk()
	}
	start := len(c.bytes)
	out, err := m.MarshalAppend(c.bytes[start : start : start+size])
	if err != nil {
		chunks.Put(c)
		return nil, err
	}
	c.bytes = c.bytes[:start+size]
	i := c.n
	c.bufs[i] = out
	c.lists[i] = &c.bufs[i]
	c.n++
	chunks.Put(c)
	return c.lists[i : i+1 : i+1], nil
}

// Unmarshal decodes data into v, an [Unmarshaler] or a proto.Message (as
// proto.Unmarshal does).
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if u, ok := v.(Unmarshaler); ok {
		return u.UnmarshalWire(buf.ReadOnlyData())
	}
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("protocodec: cannot unmarshal into %T, not a protocol buffer", v)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// messageOf returns v as a proto.Message, nil when it is none.
func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}
