package reduce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// The kinds of log record.
const (
	recMessage   byte = 'M' // a message read
	recWatermark byte = 'W' // a watermark whose windows' results are written
)

var errRecord = errors.New("reduce: a log record cut short")

// appendMessage encodes m as a message record: its ID, keys, value, event
// time and headers, which is what a reduce reads of it.
func appendMessage(b []byte, m *isb.Message) []byte {
	return appendMessageBody(append(b, recMessage), m)
}

// appendMessageBody encodes m without a record kind.
func appendMessageBody(b []byte, m *isb.Message) []byte {
	b = appendString(b, m.ID)
	b = binary.AppendUvarint(b, uint64(len(m.Keys)))
	for _, k := range m.Keys {
		b = appendString(b, k)
	}
	b = appendBytes(b, m.Value)
	b = binary.AppendVarint(b, m.EventTime.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(m.Headers)))
	for _, k := range sortedKeys(m.Headers) {
		b = appendString(b, k)
		b = appendString(b, m.Headers[k])
	}
	return b
}

// appendWatermark encodes a watermark record.
func appendWatermark(b []byte, wm time.Time) []byte {
	return binary.AppendVarint(append(b, recWatermark), wm.UnixNano())
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBytes(b []byte, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// reader decodes a record; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errRecord
		return nil
	}
	v := slices.Clone(r.b[:n])
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

// decodeMessage decodes the body of a message record.
func decodeMessage(b []byte) (isb.Message, error) {
	r := &reader{b: b}
	var m isb.Message
	m.ID = r.string()
	if n := r.uvarint(); n > 0 && n <= uint64(len(b)) {
		m.Keys = make([]string, n)
		for i := range m.Keys {
			m.Keys[i] = r.string()
		}
	}
	m.Value = r.bytes()
	m.EventTime = time.Unix(0, r.varint())
	if n := r.uvarint(); n > 0 && n <= uint64(len(b)) {
		m.Headers = make(map[string]string, n)
		for range n {
			k := r.string()
			m.Headers[k] = r.string()
		}
	}
	if r.err != nil {
		return isb.Message{}, fmt.Errorf("%w: message %q", r.err, m.ID)
	}
	return m, nil
}

// appendUvarint appends v as a uvarint.
func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
