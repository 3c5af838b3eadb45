// Package wiretest makes damaged protobuf wire data, to test hand-written
// decoders against the generated code.
package wiretest

import (
	"iter"
	"math/rand/v2"
	"slices"
)

// Mutations yields n inputs made from seeds at random, from the generator
// seeded with s1 and s2: a seed cut short, with one to three bytes changed,
// with another seed appended (proto merges the two), or with an unknown or
// mistyped field appended.
func Mutations(seeds [][]byte, s1, s2 uint64, n int) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		rng := rand.New(rand.NewPCG(s1, s2))
		for i := range n {
			b := slices.Clone(seeds[rng.IntN(len(seeds))])
			switch rng.IntN(4) {
			case 0:
				if len(b) > 0 {
					b = b[:rng.IntN(len(b))]
				}
			case 1:
				for range 1 + rng.IntN(3) {
					if len(b) > 0 {
						b[rng.IntN(len(b))] = byte(rng.UintN(256))
					}
				}
			case 2:
				b = append(b, seeds[rng.IntN(len(seeds))]...)
			case 3:
				b = append(b, byte(rng.UintN(256)), byte(rng.UintN(256)), byte(rng.UintN(4)))
			}
			if !yield(i, b) {
				return
			}
		}
	}
}
