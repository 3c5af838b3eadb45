package route

import (
	"encoding/binary"
	"math/bits"
	"strings"
)

// OrderedPartition is the partition of n that a message with keys goes to
// on an edge to an ordered vertex, as Numaflow's runtime picks it: the
// SipHash-1-3 (keys 0, 0; Rust's DefaultHasher) of the keys joined by ":",
// modulo n. A message without keys hashes the empty string, so every such
// message of an edge goes to one partition.
func OrderedPartition(keys []string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(sipHash13([]byte(strings.Join(keys, ":"))) % uint64(n))
}

// sipHash13 is SipHash-1-3 of b with both keys 0.
func sipHash13(b []byte) uint64 {
	v0 := uint64(0x736f6d6570736575)
	v1 := uint64(0x646f72616e646f6d)
	v2 := uint64(0x6c7967656e657261)
	v3 := uint64(0x7465646279746573)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(b)
	for ; len(b) >= 8; b = b[8:] {
		m := binary.LittleEndian.Uint64(b)
		v3 ^= m
		round()
		v0 ^= m
	}
	last := uint64(n) << 56
	for i, c := range b {
		last |= uint64(c) << (8 * i)
	}
	v3 ^= last
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
