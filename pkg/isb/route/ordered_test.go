package route

import "testing"

// The hashes are those of Rust's std::hash::DefaultHasher (SipHash-1-3, keys
// 0, 0) after Hasher::write of the string's bytes, which Numaflow's
// determine_partition takes modulo the partitions.
func TestOrderedPartitionMatchesNumaflow(t *testing.T) {
	for _, tc := range []struct {
		key    string
		hash   uint64
		p3, p7 int
	}{
		{"", 0xd1fba762150c532c, 0, 1},
		{"a", 0x407448d2b89b1813, 1, 5},
		{"b", 0x8b22cf2602fb60ce, 1, 3},
		{"key-0", 0x0c032baccc863b36, 0, 5},
		{"key-1", 0xcf0b45d25cc7758e, 0, 5},
		{"user-123", 0x5a88412e4bb8c8e2, 2, 4},
		{"a:b", 0xe6c311fcd7b7d562, 2, 6},
		{"0123456789abcdef", 0x1d42b30f7e060c24, 1, 3},
		{"the quick brown fox jumps", 0x00c98b97e4f70042, 0, 2},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := sipHash13([]byte(tc.key)); got != tc.hash {
				t.Fatalf("sipHash13(%q) = %#x, want %#x", tc.key, got, tc.hash)
			}
			if got := OrderedPartition([]string{tc.key}, 3); got != tc.p3 {
				t.Errorf("partition of 3 = %d, want %d", got, tc.p3)
			}
			if got := OrderedPartition([]string{tc.key}, 7); got != tc.p7 {
				t.Errorf("partition of 7 = %d, want %d", got, tc.p7)
			}
		})
	}
	if got, want := OrderedPartition([]string{"a", "b"}, 7), 6; got != want {
		t.Errorf("keys [a b] go to %d of 7, want %d (the hash of \"a:b\")", got, want)
	}
	if got := OrderedPartition([]string{"user-123"}, 1); got != 0 {
		t.Errorf("one partition: got %d", got)
	}
}
