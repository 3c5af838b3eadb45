package protocodec

import (
	"sync"
	"unsafe"
)

// Arena copies what a decoder keeps of a message out of the buffer it
// decodes (which gRPC reuses) into chunks shared with other messages, so
// that a message with a few fields costs a few bytes of a chunk rather than
// an allocation per field. A chunk is freed by the garbage collector once
// nothing carved from it is referenced: keeping one small part of a message
// keeps its chunk.
//
// An Arena is not safe for concurrent use: take one with [GetArena] for the
// decoding of a message and [Arena.Release] it at the end.
type Arena struct {
	bytes   []byte
	strings []string
}

// Sizes of an arena's chunks, and the largest copy carved out of one.
const (
	arenaBytes   = 16 << 10
	arenaStrings = 256
	arenaLargest = arenaBytes / 8
)

var arenas = sync.Pool{New: func() any { return new(Arena) }}

// GetArena returns an arena for the caller's use until it calls Release.
func GetArena() *Arena { return arenas.Get().(*Arena) }

// Release hands a back for the decoding of other messages; what was carved
// from it stays valid.
func (a *Arena) Release() { arenas.Put(a) }

// Bytes returns a copy of b, nil when b is empty.
func (a *Arena) Bytes(b []byte) []byte {
	n := len(b)
	if n == 0 {
		return nil
	}
	if n > arenaLargest {
		return append([]byte(nil), b...)
	}
	if cap(a.bytes)-len(a.bytes) < n {
		a.bytes = make([]byte, 0, arenaBytes)
	}
	start := len(a.bytes)
	a.bytes = append(a.bytes, b...)
	return a.bytes[start : start+n : start+n]
}

// String returns b as a string, "" when b is empty.
func (a *Arena) String(b []byte) string {
	c := a.Bytes(b)
	if len(c) == 0 {
		return ""
	}
	// The copy is never written again: it is immutable, as a string must be.
	return unsafe.String(&c[0], len(c))
}

// Strings returns a slice of n empty strings, whose capacity is n: append
// to it allocates anew rather than overwriting another message's strings.
func (a *Arena) Strings(n int) []string {
	if n == 0 {
		return nil
	}
	if n > arenaStrings/4 {
		return make([]string, n)
	}
	if cap(a.strings)-len(a.strings) < n {
		a.strings = make([]string, 0, arenaStrings)
	}
	start := len(a.strings)
	a.strings = a.strings[:start+n]
	return a.strings[start : start+n : start+n]
}
