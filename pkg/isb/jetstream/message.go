package jetstream

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"

	"github.com/sluiceflow/sluice/internal/isbproto"
	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// The body of a JetStream message is an isb.Message in the protocol buffers
// wire format, written and read with protowire, as if by this schema:
//
//	message Message {
//	  string id = 1;                 // omitted when empty
//	  repeated string keys = 2;      // one field per key, in order
//	  bytes value = 3;               // omitted when empty
//	  int64 event_time = 4;          // unix nanoseconds; omitted for the zero time
//	  map<string, string> headers = 5; // entries {string key = 1; string value = 2;}
//	  common.Metadata metadata = 6;  // the user metadata; omitted when empty
//	}
//
// Tags are not carried: they route a message into a buffer and mean nothing
// after it. Decoding skips fields it does not know, so fields can be added.
// An event time outside the years 1678 to 2262 (beyond int64 nanoseconds)
// does not survive the trip.
const (
	fieldID        protowire.Number = 1
	fieldKeys      protowire.Number = 2
	fieldValue     protowire.Number = 3
	fieldEventTime protowire.Number = 4
	fieldHeaders   protowire.Number = 5
	fieldMetadata  protowire.Number = 6

	fieldHeaderKey   protowire.Number = 1
	fieldHeaderValue protowire.Number = 2
)

// encodedSize returns the length of m's encoding.
func encodedSize(m *isb.Message) int {
	n := 0
	if m.ID != "" {
		n += protowire.SizeTag(fieldID) + protowire.SizeBytes(len(m.ID))
	}
	for _, k := range m.Keys {
		n += protowire.SizeTag(fieldKeys) + protowire.SizeBytes(len(k))
	}
	if len(m.Value) > 0 {
		n += protowire.SizeTag(fieldValue) + protowire.SizeBytes(len(m.Value))
	}
	if !m.EventTime.IsZero() {
		n += protowire.SizeTag(fieldEventTime) + protowire.SizeVarint(uint64(m.EventTime.UnixNano()))
	}
	for k, v := range m.Headers {
		n += protowire.SizeTag(fieldHeaders) + protowire.SizeBytes(headerSize(k, v))
	}
	if len(m.Metadata) > 0 {
		n += protowire.SizeTag(fieldMetadata) + protowire.SizeBytes(proto.Size(isbproto.ToMetadata(m.Metadata)))
	}
	return n
}

func headerSize(k, v string) int {
	return protowire.SizeTag(fieldHeaderKey) + protowire.SizeBytes(len(k)) +
		protowire.SizeTag(fieldHeaderValue) + protowire.SizeBytes(len(v))
}

// appendMessage appends m's encoding to b.
func appendMessage(b []byte, m *isb.Message) []byte {
	if m.ID != "" {
		b = protowire.AppendTag(b, fieldID, protowire.BytesType)
		b = protowire.AppendString(b, m.ID)
	}
	for _, k := range m.Keys {
		b = protowire.AppendTag(b, fieldKeys, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	if len(m.Value) > 0 {
		b = protowire.AppendTag(b, fieldValue, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Value)
	}
	if !m.EventTime.IsZero() {
		b = protowire.AppendTag(b, fieldEventTime, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.EventTime.UnixNano()))
	}
	for k, v := range m.Headers {
		b = protowire.AppendTag(b, fieldHeaders, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(headerSize(k, v)))
		b = protowire.AppendTag(b, fieldHeaderKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, fieldHeaderValue, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	if len(m.Metadata) > 0 {
		md := isbproto.ToMetadata(m.Metadata)
		b = protowire.AppendTag(b, fieldMetadata, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(md)))
		b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, md) // cannot fail: every field is valid
	}
	return b
}

// decodeMessage decodes b into m (which it overwrites). Nothing is copied:
// m.Value, and the strings of m (its ID, keys and headers), alias b, which
// must not change while m is in use. The keys go into keys, and m.Keys is a
// slice of it; with keys nil they get an array of their own. An empty key
// list, value or header map decodes as nil.
func decodeMessage(b []byte, m *isb.Message, keys *jsconsumer.Keys) error {
	*m = isb.Message{}
	if keys == nil {
		keys = jsconsumer.NewKeys(1)
	}
	firstKey := keys.Len()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fieldID && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("id: %w", protowire.ParseError(n))
			}
			m.ID, b = alias(v), b[n:]
		case num == fieldKeys && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("keys: %w", protowire.ParseError(n))
			}
			keys.Add(alias(v))
			b = b[n:]
		case num == fieldValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("value: %w", protowire.ParseError(n))
			}
			if len(v) > 0 {
				m.Value = v[:len(v):len(v)]
			}
			b = b[n:]
		case num == fieldEventTime && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("event time: %w", protowire.ParseError(n))
			}
			m.EventTime, b = time.Unix(0, int64(v)), b[n:]
		case num == fieldHeaders && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("headers: %w", protowire.ParseError(n))
			}
			if err := decodeHeader(v, m); err != nil {
				return fmt.Errorf("headers: %w", err)
			}
			b = b[n:]
		case num == fieldMetadata && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("metadata: %w", protowire.ParseError(n))
			}
			var md common.Metadata
			if err := proto.Unmarshal(v, &md); err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			m.Metadata, b = isbproto.FromMetadata(&md), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	m.Keys = keys.Since(firstKey)
	return nil
}

// alias returns b as a string without copying it: b must never change
// afterwards. The bodies of messages read are never written to.
func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decodeHeader decodes one map entry into m.Headers.
func decodeHeader(b []byte, m *isb.Message) error {
	var key, value string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if (num == fieldHeaderKey || num == fieldHeaderValue) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if num == fieldHeaderKey {
				key = alias(v)
			} else {
				value = alias(v)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	if m.Headers == nil {
		m.Headers = make(map[string]string, 1)
	}
	m.Headers[key] = value
	return nil
}

// A frame carries several messages in one JetStream message, marked with the
// header Sluice-Frame (the number of messages). Its body is each message's
// encoding, as above, after its length as a varint.

// appendFrame appends the frame of msgs to b. sizes, when not nil, holds
// each message's encodedSize.
func appendFrame(b []byte, msgs []isb.Message, sizes []int) []byte {
	for i := range msgs {
		size := 0
		if sizes != nil {
			size = sizes[i]
		} else {
			size = encodedSize(&msgs[i])
		}
		b = protowire.AppendVarint(b, uint64(size))
		b = appendMessage(b, &msgs[i])
	}
	return b
}

// decodeFrame decodes the count messages of a frame into out, which it
// extends; as with decodeMessage, they alias b and their keys go into keys.
func decodeFrame(b []byte, count int, out []isb.Message, keys *jsconsumer.Keys) ([]isb.Message, error) {
	for i := 0; i < count; i++ {
		size, n := protowire.ConsumeVarint(b)
		if n < 0 || size > uint64(len(b)-n) {
			return out, fmt.Errorf("frame message %d of %d: bad length", i, count)
		}
		b = b[n:]
		out = append(out, isb.Message{})
		if err := decodeMessage(b[:size], &out[len(out)-1], keys); err != nil {
			return out[:len(out)-1], fmt.Errorf("frame message %d of %d: %w", i, count, err)
		}
		b = b[size:]
	}
	if len(b) != 0 {
		return out, fmt.Errorf("frame of %d messages: %d bytes left over", count, len(b))
	}
	return out, nil
}

// frameID identifies a frame by its messages' IDs, for deduplication: the same
// messages in the same order give the same ID. It is false when a message has
// no ID.
func frameID(msgs []isb.Message) (string, bool) {
	b := appendFrameID(nil, msgs)
	return string(b), b != nil
}

// appendFrameID appends the frameID of msgs to b; nothing when a message has
// no ID. The ID is "frame-", the 64-bit FNV-1a hash (hex) of the messages'
// IDs each followed by a zero byte, "-" and the number of messages.
func appendFrameID(b []byte, msgs []isb.Message) []byte {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := range msgs {
		id := msgs[i].ID
		if id == "" {
			return b
		}
		for j := 0; j < len(id); j++ {
			h ^= uint64(id[j])
			h *= prime64
		}
		h *= prime64 // the zero byte after it
	}
	b = append(b, "frame-"...)
	b = strconv.AppendUint(b, h, 16)
	b = append(b, '-')
	return strconv.AppendInt(b, int64(len(msgs)), 10)
}
